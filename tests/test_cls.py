"""mmpretrain: a shrunken EVT ImageNet config end to end, inferencer, get_model, LR decay."""
import os.path as osp

import pytest
import torch

from helpers import CONFIGS, MIXED_MIXERS, run_tool, write_config

EVT_T = osp.join(CONFIGS, 'cls', 'evt', 'evt-t_8xb128_in1k.py')


def tiny_cls_config(data_root, work_dir, base=EVT_T):
    return f'''
_base_ = {base!r}
work_dir = {work_dir!r}
data_root = {data_root!r}
classes = ('triangle', 'square', 'pentagon', 'hexagon', 'octagon', 'circle')
data_preprocessor = dict(num_classes=6)
model = dict(backbone=dict(arch='evt-test', drop_path_rate=0.1, mixers={MIXED_MIXERS}),
             neck=dict(in_channels=128, hidden_channels=64),
             head=dict(num_classes=6, in_channels=64))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=64, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2, total_level=10,
         magnitude_level=9, magnitude_std=0.5,
         hparams=dict(pad_val=[104, 116, 124], interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0.25, mode='rand', min_area_ratio=0.02,
         max_area_ratio=1 / 3, fill_color=[103.53, 116.28, 123.675],
         fill_std=[57.375, 57.12, 58.395]),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=72, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=64),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=24, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, type='CustomDataset', data_root=data_root,
                 ann_file='meta/train.txt', data_prefix='train', classes=classes,
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, type='CustomDataset', data_root=data_root,
                 ann_file='meta/val.txt', data_prefix='val', classes=classes,
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
train_cfg = dict(max_epochs=1, val_interval=1)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False, begin=0, end=1)]
default_hooks = dict(logger=dict(interval=1))
'''


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
    from mmpretrain import ImageClassificationInferencer, get_model
    cfg, work, _ = trained
    ckpt = osp.join(work, 'epoch_1.pth')
    img = osp.join(cls_data, 'val', 'circle', '00000.jpg')
    result = ImageClassificationInferencer(cfg, pretrained=ckpt, device='cpu')(img)[0]
    assert result['pred_class'] in ('triangle', 'square', 'pentagon', 'hexagon', 'octagon',
                                    'circle')
    assert len(result['pred_scores']) == 6
    model = get_model(cfg, pretrained=ckpt)
    state = torch.load(ckpt, map_location='cpu')['state_dict']
    torch.testing.assert_close(model.state_dict()['backbone.stem.0.conv.weight'],
                               state['backbone.stem.0.conv.weight'])


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
