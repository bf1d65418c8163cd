"""The RMT authors' checkpoints, as they release them, converted and checked against an
independent re-statement of their models (``rmt_reference.py``): ImageNet files with plain
and EMA weights and pickled ``args``, token-labelled files, and mmdet 2.x / mmseg 0.x
detectors and segmentors evaluated with ``tools/test.py``."""
import argparse
import importlib
import os.path as osp
import pathlib

import pytest
import torch

from det_tiny import CASCADE_OPTS, tiny_det_config
from helpers import CONFIGS, load_tool, run_tool, write_config
from rmt_reference import (authors_dense_checkpoint, authors_head_keys, authors_state_dict,
                           rmt_reference_dense_features, rmt_reference_logits)
from seg_tiny import tiny_seg_config

# rmt-test in the authors' terms (mmevt.models.backbones.evt.arch_zoo['rmt-test'])
TINY = dict(embed_dims=[16, 32, 64, 128], depths=[1, 2, 2, 1], num_heads=[1, 2, 4, 4],
            mlp_ratios=[2] * 4, layerscales=[False, False, True, True], init_values=[2] * 4,
            heads_ranges=[4, 4, 6, 6])
CHUNK = (0, 1, 2)  # decomposed stages of rmt-test
# The authors' four released arches (classfication_release/RMT.py: RMT_T3, RMT_S, RMT_M2,
# RMT_L6), for detection from tensor shapes.
AUTHORS_ARCHS = {
    'rmt-t': dict(embed_dims=[64, 128, 256, 512], depths=[2, 2, 8, 2], num_heads=[4, 4, 8, 16],
                  mlp_ratios=[3] * 4, layerscales=[False] * 4, heads_ranges=[4, 4, 6, 6]),
    'rmt-s': dict(embed_dims=[64, 128, 256, 512], depths=[3, 4, 18, 4], num_heads=[4, 4, 8, 16],
                  mlp_ratios=[4, 4, 3, 3], layerscales=[False] * 4, heads_ranges=[4, 4, 6, 6]),
    'rmt-b': dict(embed_dims=[80, 160, 320, 512], depths=[4, 8, 25, 8],
                  num_heads=[5, 5, 10, 16], mlp_ratios=[4, 4, 3, 3],
                  layerscales=[False, False, True, True], heads_ranges=[5, 5, 6, 6]),
    'rmt-l': dict(embed_dims=[112, 224, 448, 640], depths=[4, 8, 25, 8],
                  num_heads=[7, 7, 14, 20], mlp_ratios=[4, 4, 3, 3],
                  layerscales=[False, False, True, True], heads_ranges=[6, 6, 6, 6]),
}
TOOL = 'tools/model_converters/rmt_to_mmevt.py'


def _tool_main(*argv) -> int:
    """The converter's ``main`` run in this process (no interpreter start-up per call)."""
    return load_tool(TOOL).main([str(a) for a in argv])


def _classifier(config='rmt-t_8xb128_in1k.py', num_classes=10):
    import mmevt  # noqa: F401
    from mmengine.config import Config
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(osp.join(CONFIGS, 'cls', 'rmt', config))
    cfg.model.backbone.arch = 'rmt-test'
    cfg.model.neck.in_channels = 128
    cfg.model.head.num_classes = num_classes
    if 'token_channels' in cfg.model.head:
        cfg.model.head.token_channels = 128
    cfg.model.pop('train_cfg', None)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model.eval()


def _authors_imagenet_file(token_label=False, num_classes=10, **extra):
    """What the authors' main.py saves: plain and EMA weights (different), optimizer, args."""
    model = authors_state_dict(**TINY, token_label=token_label, num_classes=num_classes, seed=0)
    ema = authors_state_dict(**TINY, token_label=token_label, num_classes=num_classes, seed=1)
    args = argparse.Namespace(model='RMT_S', lr=1e-3, model_ema=True, token_label=token_label,
                              input_size=224, output_dir='out', aa='rand-m9-mstd0.5-inc1')
    return dict(model=model, model_ema=ema, epoch=299, args=args, max_accuracy=84.1,
                optimizer=dict(state={0: dict(step=torch.tensor(5.), exp_avg=torch.zeros(3))},
                               param_groups=[dict(lr=1e-5, params=[0])]),
                lr_scheduler=dict(t_initial=300, base_values=[1e-3]),
                scaler=dict(scale=65536.0, _growth_tracker=3), **extra)


# --------------------------------------------------------------------------- ImageNet files
def test_key_round_trip_in_the_authors_layout():
    from mmevt.converters.rmt_keys import convert_rmt, convert_to_rmt
    model = _classifier()
    authors = authors_state_dict(**TINY)
    ours = convert_rmt(authors)
    model.load_state_dict(ours, strict=True)  # every key of the classifier, nothing extra
    back = convert_to_rmt(ours)
    expected = {k: v for k, v in authors.items() if '.Relpos.' not in k}
    assert sorted(back) == sorted(expected)
    for k, v in expected.items():
        assert torch.equal(back[k], v), k


@pytest.mark.parametrize('token_label', [False, True], ids=['plain', 'token-labelled'])
def test_converted_weights_reproduce_the_authors_logits(token_label):
    from mmevt.converters.rmt_keys import convert_rmt
    model = _classifier('rmt-s-tl_8xb128_in1k.py' if token_label else 'rmt-t_8xb128_in1k.py')
    authors = authors_state_dict(**TINY, token_label=token_label)
    model.load_state_dict(convert_rmt(authors), strict=True)
    x = torch.randn(2, 3, 96, 128)
    with torch.no_grad():
        ours = model(x, mode='tensor')
        ref = rmt_reference_logits(authors, x, CHUNK)
        if token_label:  # the token term matters: without it the logits differ
            plain = dict(authors)
            plain.pop('aux_head.weight'), plain.pop('aux_head.bias')
            assert (ref - rmt_reference_logits(plain, x, CHUNK)).abs().max() > 1e-2
    assert ours.shape == (2, 10)
    # random weights give logits up to ~1e5 with fp32 differences ~5e-7 of that between the
    # two computation orders; a small logit beside them is only as exact as the largest
    scale = ref.abs().max().item()
    torch.testing.assert_close(ours, ref, atol=1e-5 * scale, rtol=1e-4)
    assert scale > 1e-2  # not a trivially small output


def test_token_label_head_predicts_but_refuses_to_train():
    model = _classifier('rmt-s-tl_8xb128_in1k.py')
    from mmevt.converters.rmt_keys import convert_rmt
    model.load_state_dict(convert_rmt(authors_state_dict(**TINY, token_label=True)))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        samples = model(x, mode='predict')
        logits = model(x, mode='tensor')
    assert [int(s.pred_label) for s in samples] == logits.argmax(1).tolist()
    feats = model.extract_feat(x)
    with pytest.raises(NotImplementedError, match='training it needs token labels'):
        model.head.loss(feats, samples)


def test_arch_detection_and_the_default_weights():
    from mmevt.converters.rmt import README_WEIGHTS, detect_arch, select_weights
    for name, arch in AUTHORS_ARCHS.items():  # full-size files, shapes only
        sd = authors_state_dict(**arch, init_values=[2] * 4, device='meta', num_classes=1000)
        assert detect_arch(sd) == name
        dense = authors_state_dict(**arch, init_values=[2] * 4, device='meta', dense=True)
        assert detect_arch(dense, prefix='backbone.') == name
    assert detect_arch(authors_state_dict(**TINY)) == 'rmt-test'
    assert README_WEIGHTS == {'rmt-t': 'model', 'rmt-s': 'model_ema', 'rmt-b': 'model_ema',
                              'rmt-l': 'model_ema'}
    plain, ema = {'head.weight': torch.zeros(1)}, {'head.weight': torch.ones(1)}
    ckpt = dict(model=plain, model_ema=ema, args=argparse.Namespace())
    assert select_weights(ckpt, None, 'rmt-t')[1] == 'model'
    for arch in ('rmt-s', 'rmt-b', 'rmt-l'):
        state, which, why = select_weights(ckpt, None, arch)
        assert which == 'model_ema' and state['head.weight'].item() == 1 and 'EMA' in why
    assert select_weights(ckpt, 'model', 'rmt-s')[0]['head.weight'].item() == 0
    with pytest.raises(ValueError, match='pass --weights model or --weights model_ema'):
        select_weights(ckpt, None, 'rmt-test')  # no README number to choose by
    assert select_weights(dict(model=plain), None, 'rmt-s')[1] == 'model'  # the only one
    with pytest.raises(ValueError, match="no 'model_ema' entry; it holds \\['model'\\]"):
        select_weights(dict(model=plain), 'model_ema', 'rmt-s')


def test_stored_decay_rates_of_another_arch_are_refused():
    from mmevt.models.backbones.archs import resolve_arch
    from mmevt.converters.rmt import check_relpos
    sd = authors_state_dict(**TINY)
    assert check_relpos(sd, resolve_arch('rmt-test')) == 8
    sd['layers.2.Relpos.decay'] = sd['layers.2.Relpos.decay'] * 1.5  # other heads_range
    with pytest.raises(ValueError, match='layers.2.Relpos.decay of the checkpoint'):
        check_relpos(sd, resolve_arch('rmt-test'))


def test_unknown_keys_are_reported():
    from mmevt.converters.rmt_keys import convert_rmt, convert_rmt_dense
    with pytest.raises(ValueError, match=r"not in the authors' RMT layout: \['pos_embed'\]"):
        convert_rmt({'pos_embed': torch.zeros(1)})
    dense = authors_state_dict(**TINY, dense=True)
    dense['backbone.cls_token'] = torch.zeros(1)
    with pytest.raises(ValueError, match=r"\['backbone.cls_token'\]; is this an RMT det"):
        convert_rmt_dense(dense)


def test_converter_reads_the_authors_imagenet_file(tmp_path, capsys):
    from mmevt.models import EVT
    from mmevt.converters.rmt_keys import convert_rmt
    src = tmp_path / 'rmt_authors.pth'
    ckpt = _authors_imagenet_file()
    torch.save(ckpt, src)
    # rmt-test has no README number: both weights present, so the choice is the user's
    assert _tool_main(src, tmp_path / 'x.pth') == 2
    assert 'pass --weights model or --weights model_ema' in capsys.readouterr().err
    for which in ('model', 'model_ema'):
        dst = tmp_path / f'{which}.pth'
        assert _tool_main(src, dst, '--weights', which) == 0
        assert f"converting '{which}' (chosen with --weights)" in capsys.readouterr().out
        got = torch.load(dst, map_location='cpu')
        assert got['meta']['weights'] == which
        expected = convert_rmt(ckpt[which])
        assert sorted(got['state_dict']) == sorted(expected)
        for k, v in expected.items():
            assert torch.equal(got['state_dict'][k], v), k
    plain = torch.load(tmp_path / 'model.pth')['state_dict']
    ema = torch.load(tmp_path / 'model_ema.pth')['state_dict']
    # the library the tool runs
    from mmevt.converters import rmt_keys
    from mmevt.converters.rmt import convert_checkpoint
    assert rmt_keys.convert_rmt is convert_rmt
    state, meta, notes = convert_checkpoint(src, weights='model_ema')
    assert meta == dict(converted_from='rmt_authors.pth', layout='cls', weights='model_ema',
                        arch='rmt-test')
    assert len(notes) == 1 and "converting 'model_ema' (chosen with --weights)" in notes[0]
    assert all(torch.equal(state[k], v) for k, v in ema.items())
    assert not torch.equal(plain['head.fc.weight'], ema['head.fc.weight'])
    # checked against a config's model, and the bare backbone for init_cfg
    assert _tool_main(src, tmp_path / 'checked.pth', '--weights', 'model_ema', '--config',
                      osp.join(CONFIGS, 'cls', 'rmt', 'rmt-t_8xb128_in1k.py'), '--cfg-options',
                      'model.backbone.arch=rmt-test', 'model.neck.in_channels=128',
                      'model.head.num_classes=10') == 0
    assert 'every key of' in capsys.readouterr().out
    bb = tmp_path / 'backbone.pth'
    assert _tool_main(src, bb, '--weights', 'model_ema', '--backbone-only') == 0
    backbone = EVT('rmt-test', out_indices=(3, ), out_norm_cfg=None,
                   init_cfg=dict(type='Pretrained', checkpoint=str(bb)))
    backbone.init_weights()
    for k, v in backbone.state_dict().items():
        assert torch.equal(v, ema['backbone.' + k]), k
    # nothing a user saved is overwritten; a missing SRC is named
    with pytest.raises(SystemExit):
        _tool_main(src, bb, '--weights', 'model')
    assert 'exists; pass --force' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _tool_main(tmp_path / 'no.pth', tmp_path / 'y.pth')
    assert 'SRC checkpoint' in capsys.readouterr().err


def test_a_file_pickling_anything_else_is_refused(tmp_path, capsys):
    src = tmp_path / 'with_path.pth'
    ckpt = _authors_imagenet_file()
    ckpt['args'].output_dir = pathlib.PosixPath('/tmp/out')  # a pickled class, not data
    torch.save(ckpt, src)
    assert _tool_main(src, tmp_path / 'out.pth', '--weights', 'model') == 2
    err = capsys.readouterr().err
    assert 'pickles pathlib.PosixPath' in err and '--trust-checkpoint' in err
    assert not (tmp_path / 'out.pth').exists()
    assert _tool_main(src, tmp_path / 'out.pth', '--weights', 'model',
                      '--trust-checkpoint') == 0
    assert 'weights_only=False' in capsys.readouterr().out


# --------------------------------------------------------------------------- det / seg files
def test_dense_backbone_reproduces_the_authors_features():
    from mmevt.models import EVT
    from mmevt.converters.rmt_keys import convert_rmt_dense
    sd = authors_state_dict(**TINY, dense=True)
    x = torch.randn(1, 3, 96, 64)
    for out_indices in ((0, 1, 2, 3), (1, 2, 3)):  # Mask R-CNN / UperNet, RetinaNet
        out, notes = convert_rmt_dense(sd, out_indices)
        backbone = EVT('rmt-test', out_indices=out_indices,
                       out_norm_cfg=dict(type='LN', eps=1e-5)).eval()
        backbone.load_state_dict({k[len('backbone.'):]: v for k, v in out.items()},
                                 strict=True)
        with torch.no_grad():
            ours = backbone(x)
            ref = rmt_reference_dense_features(sd, x, CHUNK, out_indices)
        for a, b in zip(ours, ref):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
        if out_indices == (1, 2, 3):
            assert "dropped ['backbone.extra_norms.0']" in notes[0]
            assert 'start_level=1' in notes[0]
        else:
            assert not notes


def test_token_labelled_backbone_initialises_a_detector_backbone(tmp_path):
    from mmevt.models import EVT
    src, dst = tmp_path / 'tl.pth', tmp_path / 'tl_mmevt.pth'
    torch.save(_authors_imagenet_file(token_label=True), src)
    assert _tool_main(src, dst, '--weights', 'model_ema') == 0
    converted = torch.load(dst)['state_dict']
    assert 'head.aux_fc.weight' in converted
    backbone = EVT('rmt-test', init_cfg=dict(type='Pretrained', checkpoint=str(dst),
                                             prefix='backbone.'))
    backbone.init_weights()
    for k, v in backbone.state_dict().items():
        if not k.startswith('norm'):  # output norms: the detector's own, not in the file
            assert torch.equal(v, converted['backbone.' + k]), k


@pytest.mark.e2e
def test_token_labelled_file_evaluates_with_tools_test(tmp_path):
    from mmevt.datasets import generate_shape_classes
    root = str(tmp_path / 'data')
    generate_shape_classes(root, num_train=1, num_val=2, img_size=(64, 64))
    src, dst = tmp_path / 'authors.pth', tmp_path / 'converted.pth'
    torch.save(_authors_imagenet_file(token_label=True, num_classes=6), src)
    # the -tl config as it is (233 -> 224 evaluation), shrunk to rmt-test and 6 classes
    cfg = write_config(tmp_path / 'tl.py', f'''
_base_ = {osp.join(CONFIGS, 'cls', 'rmt', 'rmt-s-tl_8xb128_in1k.py')!r}
data_root = {root!r}
work_dir = {str(tmp_path / 'work')!r}
classes = ('triangle', 'square', 'pentagon', 'hexagon', 'octagon', 'circle')
data_preprocessor = dict(num_classes=6)
model = dict(backbone=dict(arch='rmt-test'), neck=dict(in_channels=128),
             head=dict(num_classes=6, token_channels=128))
val_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, type='CustomDataset', data_root=data_root,
                 ann_file='meta/val.txt', data_prefix='val', classes=classes,
                 pipeline={{{{_base_.test_pipeline}}}}))
test_dataloader = val_dataloader
''')
    log = run_tool(TOOL, str(src), str(dst), '--weights', 'model_ema', '--config', cfg)
    assert "token-labelled classifier, arch rmt-test; converting 'model_ema'" in log
    log = run_tool('tools/test.py', cfg, str(dst), '--work-dir', str(tmp_path / 'test'))
    assert 'Epoch(test) [3/3]' in log and 'accuracy/top1:' in log


SEG_BASES = {'sem_fpn': 'sem_fpn/fpn_rmt-t_8xb2-80k_ade20k-512x512.py',
             'upernet': 'upernet/upernet_rmt-s_8xb2-160k_ade20k-512x512.py'}


DET_BASES = {
    'mask_rcnn': 'mask_rcnn/mask-rcnn_rmt-t_fpn_1x_coco.py',
    'retinanet': 'retinanet/retinanet_rmt-t_fpn_1x_coco.py',
    'cascade': 'cascade_rcnn/cascade-mask-rcnn_rmt-s_fpn_ms-3x_coco.py',
}


def _dense_case(family, shapes_root, tmp_path):
    """(config path, cfg options, built model) for a tiny rmt-test model of ``family``."""
    import mmevt  # noqa: F401
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    if family in DET_BASES:
        # few proposals: random RoI heads at 256 channels are slow on CPU otherwise
        extra = ("model['test_cfg']['rpn'] = dict(nms_pre=100, max_per_img=20)\n"
                 "model['test_cfg']['rcnn']['max_per_img'] = 20" if family != 'retinanet'
                 else '')
        text = tiny_det_config(osp.join(CONFIGS, 'det', DET_BASES[family]), shapes_root,
                               str(tmp_path / 'work'), family=family, arch='rmt-test',
                               extra=extra)
        scope, opts = 'mmdet', CASCADE_OPTS[1:] if family == 'cascade' else []
    else:
        text = tiny_seg_config(osp.join(CONFIGS, 'seg', SEG_BASES[family]), shapes_root,
                               str(tmp_path / 'work'), family, arch='rmt-test')
        scope, opts = 'mmseg', []
    cfg_path = write_config(tmp_path / f'{family}.py', text)
    cfg = Config.fromfile(cfg_path)
    from mmengine.config import DictAction  # same overrides as the tools get
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    if opts:
        cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    registry = importlib.import_module(f'{scope}.registry').MODELS
    # a scoped build: a global default scope would leak into later tests' registries
    with DefaultScope.overwrite_default_scope(scope):
        return cfg_path, opts, registry.build(cfg.model)


def _convert_authors_dense_model(family, shapes_root, tmp_path, capsys):
    """A fake authors' file of ``family`` converted with ``--config``; checks every tensor."""
    cfg_path, opts, model = _dense_case(family, shapes_root, tmp_path)
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    head_keys = authors_head_keys(family)
    backbone = authors_state_dict(**TINY, dense=True)
    ckpt = authors_dense_checkpoint(backbone, head_keys, shapes)
    src, dst = tmp_path / 'authors.pth', tmp_path / 'converted.pth'
    torch.save(ckpt, src)
    args = [src, dst, '--config', cfg_path] + (['--cfg-options', *opts] if opts else [])
    code = _tool_main(*args)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert 'every key of' in out.out  # and load_state_dict(strict=True) passed
    assert ("dropped ['backbone.extra_norms.0']" in out.out) == (family == 'retinanet')
    converted = torch.load(dst)['state_dict']
    for k in head_keys:  # neck and heads: same names, same tensors
        assert torch.equal(converted[k], ckpt['state_dict'][k]), k
    for i in ((1, 2, 3) if family == 'retinanet' else range(4)):
        assert torch.equal(converted[f'backbone.norm{i}.weight'],
                           backbone[f'backbone.extra_norms.{i}.weight'])
    return cfg_path, opts, dst


@pytest.mark.parametrize('family', ['mask_rcnn', 'retinanet', 'sem_fpn'])
def test_authors_detector_or_segmentor_maps_key_for_key(family, shapes_root, tmp_path,
                                                        capsys):
    _convert_authors_dense_model(family, shapes_root, tmp_path, capsys)


# tools/test.py on one detector (Cascade: the authors' ConvFC heads) and one segmentor; the
# other families are converted and loaded strictly above, to keep the e2e time down.
@pytest.mark.e2e
@pytest.mark.parametrize('family', ['cascade', 'upernet'])
def test_authors_detector_or_segmentor_evaluates_with_tools_test(family, shapes_root,
                                                                 tmp_path, capsys):
    cfg_path, opts, dst = _convert_authors_dense_model(family, shapes_root, tmp_path, capsys)
    log = run_tool('tools/test.py', cfg_path, str(dst), '--work-dir', str(tmp_path / 'test'),
                   *(['--cfg-options', *opts] if opts else []))
    assert ('coco/bbox_mAP:' in log) if family in DET_BASES else ('mIoU:' in log)


def test_a_dense_file_with_a_missing_head_tensor_is_refused(shapes_root, tmp_path, capsys):
    cfg_path, _, model = _dense_case('retinanet', shapes_root, tmp_path)
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    keys = [k for k in authors_head_keys('retinanet') if 'retina_reg' not in k]
    ckpt = authors_dense_checkpoint(authors_state_dict(**TINY, dense=True), keys, shapes)
    ckpt['state_dict']['neck.extra.weight'] = torch.zeros(1)
    torch.save(ckpt, tmp_path / 'authors.pth')
    assert _tool_main(tmp_path / 'authors.pth', tmp_path / 'out.pth', '--config',
                      cfg_path) == 2
    err = capsys.readouterr().err
    assert "['bbox_head.retina_reg.weight', 'bbox_head.retina_reg.bias']" in err
    assert "['neck.extra.weight']" in err and not (tmp_path / 'out.pth').exists()
    # without --config nothing could check the heads: refused, with the reason
    assert _tool_main(tmp_path / 'authors.pth', tmp_path / 'out.pth') == 2
    assert 'needs --config' in capsys.readouterr().err
    # the backbone alone needs no config (its keys are all the authors' backbone's)
    assert _tool_main(tmp_path / 'authors.pth', tmp_path / 'bb.pth', '--backbone-only') == 0
    assert 'left out' in capsys.readouterr().out
    bare = torch.load(tmp_path / 'bb.pth')['state_dict']
    from mmevt.models import EVT
    EVT('rmt-test', out_norm_cfg=dict(type='LN', eps=1e-5)).load_state_dict(bare, strict=True)
