"""Shrink a real mmpretrain config of ours for CPU tests: tiny arch, 64 px shapes."""
import os.path as osp

from helpers import CONFIGS, MIXED_MIXERS

EVT_T = osp.join(CONFIGS, 'cls', 'evt', 'evt-t_8xb128_in1k.py')


def tiny_cls_config(data_root: str, work_dir: str, base: str = EVT_T) -> str:
    """Config text inheriting ``base`` with the tiny mixed-mixer arch and the six-class
    shapes data at ``data_root`` (see :func:`mmevt.datasets.generate_shape_classes`)."""
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
