"""mmpretrain: a shrunken EVT ImageNet config end to end, inferencer, get_model, LR decay."""
import os.path as osp

import pytest
import torch

from cls_tiny import EVT_T, tiny_cls_config
from helpers import load_weights, run_tool, write_config


@pytest.fixture(scope='module')
def cls_data(tmp_path_factory):
    from mmevt.datasets import generate_shape_classes
    root = str(tmp_path_factory.mktemp('cls_data'))
    generate_shape_classes(root, num_train=8, num_val=2, img_size=(64, 64))
    return root


@pytest.fixture(scope='module')
def trained(cls_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('cls')
    cfg = write_config(tmp / 'evt_tiny_cls.py', tiny_cls_config(cls_data, str(tmp / 'work')))
    return cfg, str(tmp / 'work'), run_tool('tools/train.py', cfg)


@pytest.mark.e2e
def test_trains_and_tests_with_top1_top5(trained, tmp_path):
    cfg, work, log = trained
    assert 'Epoch(train) [1][2/2]' in log  # 48 images, batch 24
    assert 'EMAHook' in log
    out = run_tool('tools/test.py', cfg, osp.join(work, 'epoch_1.pth'), '--work-dir',
                   str(tmp_path))
    assert 'accuracy/top1:' in out and 'accuracy/top5:' in out


@pytest.mark.e2e
def test_inferencer_and_get_model(trained, cls_data):
    import mmevt  # noqa: F401
    from mmengine.config import Config
    from mmengine.dataset import Compose
    from mmengine.registry import DefaultScope
    from mmpretrain import ImageClassificationInferencer, get_model
    from mmpretrain.registry import TRANSFORMS

    from mmevt.datasets import CLS_CLASSES
    cfg, work, _ = trained
    ckpt = osp.join(work, 'epoch_1.pth')
    imgs = [osp.join(cls_data, 'val', name, '00000.jpg') for name in ('circle', 'triangle')]
    results = ImageClassificationInferencer(cfg, pretrained=ckpt, device='cpu')(imgs)
    model = get_model(cfg, pretrained=ckpt).eval()
    state = load_weights(ckpt)
    torch.testing.assert_close(model.state_dict()['backbone.stem.0.conv.weight'],
                               state['backbone.stem.0.conv.weight'])
    # the inferencer's scores are the checkpoint's model applied to the test pipeline's
    # output: recomputed by hand with a separately built model, they must match; and two
    # images must not give the same features (a model that ignores its input would). After
    # one tiny epoch the scores are all near 1/6, so the features are what tells them apart
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        pipeline = Compose([TRANSFORMS.build(t) for t in Config.fromfile(cfg).test_pipeline])
    feats = []
    for img, result in zip(imgs, results):
        data = pipeline(dict(img_path=img))
        batch = model.data_preprocessor(dict(inputs=[data['inputs']],
                                             data_samples=[data['data_samples']]), False)
        with torch.no_grad():
            expected = model(batch['inputs'], mode='tensor').softmax(-1)[0]
            feats.append(model.extract_feat(batch['inputs'])[-1])
        got = torch.as_tensor(result['pred_scores'])
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
        assert result['pred_label'] == int(expected.argmax())
        assert result['pred_class'] == CLS_CLASSES[result['pred_label']]
    # scale-free: the features of a barely trained model are ~1e-2, so an absolute tolerance
    # would decide by chance; a model that ignores its input gives identical features
    diff = (feats[0] - feats[1]).norm() / feats[0].norm()
    assert diff > 1e-3, f'two different images give nearly the same features ({diff:.1e})'


def test_layer_wise_lr_decay_constructor():
    import mmevt  # noqa: F401
    from mmengine.config import Config
    from mmpretrain.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS
    cfg = Config.fromfile(EVT_T)
    cfg.model.backbone.arch = 'evt-test'
    cfg.model.neck.in_channels = 128
    model = MODELS.build(cfg.model)
    constructor = OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
        type='LearningRateDecayOptimWrapperConstructor',
        optim_wrapper_cfg=dict(type='OptimWrapper',
                               optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05)),
        paramwise_cfg=dict(layer_decay_rate=0.5, norm_decay_mult=0.)))
    wrapper = constructor(model)
    lrs = {}
    for group in wrapper.optimizer.param_groups:
        for p in group['params']:
            lrs[id(p)] = group['lr']
    named = dict(model.named_parameters())
    total = sum(model.backbone.arch_settings['depths']) + 2
    stem = lrs[id(named['backbone.stem.0.conv.weight'])]
    block = lrs[id(named['backbone.stages.2.blocks.1.attn.q.weight'])]
    head = lrs[id(named['head.fc.weight'])]
    assert head == pytest.approx(1e-3)
    assert stem == pytest.approx(1e-3 * 0.5 ** (total - 1))
    assert block == pytest.approx(1e-3 * 0.5 ** (total - 1 - 4))


def test_subset_accuracy_restricts_scores_to_the_subset(tmp_path):
    import mmevt  # noqa: F401
    from mmpretrain.registry import METRICS
    from mmpretrain.evaluation import Accuracy
    full = [f'n{i:08d}' for i in range(10)]  # a 10-class stand-in for ImageNet-1k
    train = tmp_path / 'imagenet' / 'train'
    for w in full:
        (train / w).mkdir(parents=True)
    subset = tmp_path / 'imagenet-a'
    for w in (full[7], full[2], full[5]):  # folder order on disk does not matter
        (subset / w).mkdir(parents=True)
    metric = METRICS.build(dict(type='SubsetAccuracy', subset_wnids=str(subset),
                                imagenet_wnids=str(train), topk=(1, )))
    assert metric.indices.tolist() == [2, 5, 7]  # sorted subset labels -> 1k classes
    # fake logits: the global arg-max is always a class outside the subset
    scores, labels = [], []
    for label, k in enumerate([2, 5, 7]):
        s = torch.zeros(10)
        s[9] = 9.  # not in the subset
        s[k] = 5.
        scores.append(s)
        labels.append(label)
    samples = [dict(pred_score=s, gt_label=torch.tensor([lb])) for s, lb in zip(scores, labels)]
    metric.process(None, samples)
    assert metric.evaluate(3)['accuracy/top1'] == 100.0
    plain = Accuracy(topk=(1, ))
    plain.process(None, samples)
    assert plain.evaluate(3)['accuracy/top1'] == 0.0
    with pytest.raises(ValueError, match=r'not ImageNet-1k classes, e.g. \[.n09999999.\]'):
        METRICS.build(dict(type='SubsetAccuracy', subset_wnids=['n09999999'],
                           imagenet_wnids=str(train)))
