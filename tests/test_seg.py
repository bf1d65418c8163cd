"""mmseg: Semantic FPN and UperNet end to end on generated ADE20K-layout data."""
import glob
import os.path as osp

import pytest

from helpers import CONFIGS, MIXED_MIXERS, run_tool, write_config

pytestmark = pytest.mark.e2e  # every test here runs the tools in a subprocess

BASES = {
    'sem_fpn': osp.join(CONFIGS, 'seg', 'sem_fpn', 'fpn_evt-t_8xb2-80k_ade20k-512x512.py'),
    'upernet': osp.join(CONFIGS, 'seg', 'upernet', 'upernet_evt-t_8xb2-160k_ade20k-512x512.py'),
}
HEADS = {
    'sem_fpn': "neck=dict(in_channels=[16, 32, 64, 128], out_channels=32),\n"
               "    decode_head=dict(in_channels=[32] * 4, channels=32, norm_cfg=norm_cfg)",
    'upernet': "decode_head=dict(in_channels=[16, 32, 64, 128], channels=32, "
               "norm_cfg=norm_cfg),\n"
               "    auxiliary_head=dict(in_channels=64, channels=32, norm_cfg=norm_cfg)",
}
# UperNet runs the alternative token mixers (routing / external / 2D windows)
MIXERS = {'sem_fpn': 'None', 'upernet': MIXED_MIXERS}


def tiny_seg_config(family, data_root, work_dir):
    return f'''
_base_ = {BASES[family]!r}
work_dir = {work_dir!r}
data_root = {data_root + '/'!r}
crop_size = (64, 64)
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(arch='evt-test', norm_cfg=dict(type='BN'), init_cfg=None,
                  mixers={MIXERS[family]}),
    {HEADS[family]})
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(128, 64), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(128, 96), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=2, val_interval=2)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False, begin=0, end=1)]
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(by_epoch=False, interval=2))
'''


@pytest.fixture(scope='module')
def trained(shapes_root, tmp_path_factory):
    out = {}
    for family in BASES:
        tmp = tmp_path_factory.mktemp(family)
        cfg = write_config(tmp / f'{family}.py',
                           tiny_seg_config(family, shapes_root, str(tmp / 'work')))
        out[family] = (cfg, str(tmp / 'work'), run_tool('tools/train.py', cfg))
    return out


@pytest.mark.parametrize('family', list(BASES))
def test_trains_and_tests_with_ade20k_metrics(trained, family, tmp_path):
    cfg, work, log = trained[family]
    assert 'Iter(train) [2/2]' in log and 'decode.loss_ce' in log
    out = run_tool('tools/test.py', cfg, osp.join(work, 'iter_2.pth'), '--work-dir',
                   str(tmp_path))
    for metric in ('aAcc:', 'mIoU:', 'mAcc:'):
        assert metric in out


@pytest.mark.parametrize('crop,stride', [((64, 64), (48, 48)), ((80, 56), (37, 41))])
def test_slide_inference_on_a_non_square_image(trained, tmp_path, crop, stride):
    cfg, work, _ = trained['upernet']
    out = run_tool('tools/test.py', cfg, osp.join(work, 'iter_2.pth'), '--work-dir',
                   str(tmp_path), '--cfg-options', 'model.test_cfg.mode=slide',
                   f'model.test_cfg.crop_size={crop}', f'model.test_cfg.stride={stride}')
    assert 'mIoU:' in out


def test_tta_multiscale_flip(trained, tmp_path):
    cfg, work, _ = trained['sem_fpn']
    out = run_tool('tools/test.py', cfg, osp.join(work, 'iter_2.pth'), '--work-dir',
                   str(tmp_path), '--tta')
    assert 'mIoU:' in out


def test_mmseg_inferencer_runs_on_our_config(trained, shapes_root, tmp_path):
    import mmevt  # noqa: F401
    from mmseg.apis import MMSegInferencer
    cfg, work, _ = trained['sem_fpn']
    inferencer = MMSegInferencer(model=cfg, weights=osp.join(work, 'iter_2.pth'),
                                 device='cpu')
    img = osp.join(shapes_root, 'images', 'validation', '000001.jpg')
    result = inferencer(img, out_dir=str(tmp_path))
    assert result['predictions'].shape == (96, 128)
    assert glob.glob(str(tmp_path / 'vis' / '*'))
