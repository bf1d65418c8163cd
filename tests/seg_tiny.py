"""Shrink a real mmseg config of ours for CPU tests: tiny arch and heads, 64 x 64 crops."""

HEADS = {
    'sem_fpn': "neck=dict(in_channels=[16, 32, 64, 128], out_channels=32),\n"
               "    decode_head=dict(in_channels=[32] * 4, channels=32, norm_cfg=norm_cfg)",
    'upernet': "decode_head=dict(in_channels=[16, 32, 64, 128], channels=32, "
               "norm_cfg=norm_cfg),\n"
               "    auxiliary_head=dict(in_channels=64, channels=32, norm_cfg=norm_cfg)",
}


def tiny_seg_config(base: str, data_root: str, work_dir: str, family: str,
                    arch: str = 'evt-test', mixers: str = 'None') -> str:
    """Config text inheriting ``base`` (absolute path; ``family``: ``sem_fpn`` or
    ``upernet``) with a tiny backbone and heads, BN instead of SyncBN, 2 iterations."""
    return f'''
_base_ = {base!r}
work_dir = {work_dir!r}
data_root = {data_root + '/'!r}
crop_size = (64, 64)
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(arch={arch!r}, norm_cfg=dict(type='BN'), init_cfg=None,
                  mixers={mixers}),
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
