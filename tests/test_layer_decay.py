"""Layer-wise lr decay (EVTLayerDecayOptimWrapperConstructor) in detectors and segmentors:
per-parameter lrs and weight decays as built, and the example configs training."""
import os.path as osp

import pytest
import torch

from det_tiny import tiny_det_config
from helpers import CONFIGS, load_config, run_tool, write_config
from seg_tiny import tiny_seg_config

DET = osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_layer-decay_1x_coco.py')
SEG = osp.join(CONFIGS, 'seg', 'upernet', 'upernet_evt-t_layer-decay_8xb2-160k_ade20k-512x512.py')
# evt-test has depths 1-1-2-1: 7 depth ids (stem 0, blocks 1..5, output norms 6)
NUM_LAYERS = 7


def _tiny_model(cfg, scope: str):
    """The config's model with the evt-test backbone, built in its toolkit's scope."""
    import importlib

    from mmengine.registry import DefaultScope
    cfg.model.backbone.update(arch='evt-test', norm_cfg=dict(type='BN'), init_cfg=None)
    if scope == 'mmdet':
        cfg.model.neck.in_channels = [16, 32, 64, 128]
    else:
        cfg.model.decode_head.update(in_channels=[16, 32, 64, 128], channels=32)
        cfg.model.auxiliary_head.update(in_channels=64, channels=32)
    importlib.import_module(f'{scope}.utils').register_all_modules(init_default_scope=False)
    with DefaultScope.overwrite_default_scope(scope):
        return importlib.import_module(f'{scope}.registry').MODELS.build(cfg.model)


def _groups(cfg, model, scope: str) -> dict:
    """name -> (lr, weight decay) from the config's optim_wrapper, built in ``scope`` (so
    the constructor is found through the toolkit's registry)."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope(scope):
        wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    names = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for g in wrapper.optimizer.param_groups:
        p, = g['params']
        assert g['param_name'] == names[id(p)]
        out[names[id(p)]] = (g['lr'], g['weight_decay'])
    assert len(out) == sum(p.requires_grad for p in model.parameters())
    return out


@pytest.mark.parametrize('path,scope,heads', [
    (DET, 'mmdet', ['neck.lateral_convs.0.conv.weight', 'rpn_head.rpn_conv.weight',
                    'roi_head.bbox_head.fc_cls.weight', 'roi_head.mask_head.conv_logits.weight']),
    (SEG, 'mmseg', ['decode_head.conv_seg.weight', 'decode_head.fpn_bottleneck.conv.weight',
                    'auxiliary_head.conv_seg.weight']),
], ids=['mask_rcnn', 'upernet'])
def test_per_parameter_lr_and_weight_decay(path, scope, heads):
    cfg = load_config(path)
    assert cfg.optim_wrapper.constructor == 'EVTLayerDecayOptimWrapperConstructor'
    rate = cfg.optim_wrapper.paramwise_cfg.layer_decay_rate
    lr, wd = cfg.optim_wrapper.optimizer.lr, cfg.optim_wrapper.optimizer.weight_decay
    got = _groups(cfg, _tiny_model(cfg, scope), scope)

    def scale(layer_id):
        return rate**(NUM_LAYERS - 1 - layer_id)

    expected_lr = {
        'backbone.stem.0.conv.weight': scale(0),
        'backbone.stem.0.norm.weight': scale(0),
        'backbone.stages.0.blocks.0.attn.q.weight': scale(1),  # first block
        'backbone.stages.0.blocks.0.norm1.weight': scale(1),
        'backbone.stages.1.downsample.conv.weight': scale(2),  # with stage 2's first block
        'backbone.stages.1.blocks.0.ffn.fc1.weight': scale(2),
        'backbone.stages.2.blocks.1.attn.q.weight': scale(4),
        'backbone.stages.3.blocks.0.ffn.fc2.weight': scale(5),  # last block
        'backbone.norm3.weight': 1.,  # output norms train with the neck / heads
        **{name: 1. for name in heads},
    }
    for name, mult in expected_lr.items():
        assert got[name][0] == pytest.approx(lr * mult, rel=1e-6), name
    assert scale(0) < 0.75  # the decay is real, not a rounding of 1
    # the inherited no-decay rules: '*norm*' by name, except the stem's BNs
    assert got['backbone.stem.0.norm.weight'][1] == wd
    assert got['backbone.stages.0.blocks.0.norm1.weight'][1] == 0
    assert got['backbone.stages.1.downsample.norm.weight'][1] == 0
    assert got['backbone.stages.0.blocks.0.attn.q.weight'][1] == wd
    assert got[heads[0]][1] == wd


def test_rules_combine_and_bad_settings_are_clear_errors():
    from mmengine.optim import build_optim_wrapper

    from mmevt.models import EVT
    model = EVT('evt-test')  # a bare backbone: its own get_layer_depth, no prefix
    cfg = dict(constructor='EVTLayerDecayOptimWrapperConstructor',
               optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
               paramwise_cfg=dict(layer_decay_rate=0.5, norm_decay_mult=0.,
                                  custom_keys={'stem': dict(lr_mult=0.1)}))
    groups = {g['param_name']: g for g in build_optim_wrapper(model, cfg).optimizer.param_groups}
    # custom_keys' lr_mult and the depth scale multiply; norm_decay_mult still applies
    assert groups['stem.0.conv.weight']['lr'] == pytest.approx(1e-3 * 0.1 * 0.5**6)
    assert groups['stages.0.blocks.0.norm1.weight']['weight_decay'] == 0
    assert groups['stages.0.blocks.0.norm1.weight']['lr'] == pytest.approx(1e-3 * 0.5**5)
    assert groups['stages.0.blocks.0.attn.q.weight']['weight_decay'] == 0.05
    for rate in (None, 0, 1.5, 'x', True):
        bad = dict(cfg, paramwise_cfg=dict(layer_decay_rate=rate))
        with pytest.raises(ValueError, match=f'layer_decay_rate.*got {rate!r}'):
            build_optim_wrapper(model, bad)
    with pytest.raises(ValueError, match='get_layer_depth.*Linear'):
        build_optim_wrapper(torch.nn.Linear(2, 2), cfg)


@pytest.mark.e2e
def test_det_and_seg_configs_train_with_layer_decay(shapes_root, tmp_path):
    runs = {
        'det': tiny_det_config(DET, shapes_root, str(tmp_path / 'det')),
        'seg': tiny_seg_config(SEG, shapes_root, str(tmp_path / 'seg'), 'upernet'),
    }
    for kind, text in runs.items():
        cfg = write_config(tmp_path / f'{kind}.py', text)
        # no validation: this test is about the optimizer
        log = run_tool('tools/train.py', cfg, '--cfg-options', 'train_cfg.val_interval=1000')
        rate = 0.95 if kind == 'det' else 0.9
        assert f'layer-wise lr decay {rate}: layer 0: x{rate**6:.3g}' in log
        ckpt = 'epoch_1.pth' if kind == 'det' else 'iter_2.pth'
        state = torch.load(str(tmp_path / kind / ckpt), map_location='cpu')
        groups = state['optimizer']['param_groups']
        base = max(g['initial_lr'] for g in groups)
        for g in groups:
            expected = rate**(NUM_LAYERS - 1 - g['layer_id'])
            assert g['initial_lr'] == pytest.approx(base * expected), g['param_name']
        assert {g['layer_id'] for g in groups} == set(range(NUM_LAYERS))
