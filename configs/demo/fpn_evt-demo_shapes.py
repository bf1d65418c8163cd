# `make demo`: Semantic FPN with a small EVT backbone on the generated shapes dataset in
# ADE20K layout (data/demo), CPU-sized: 128x128 images, 4 classes (background + shapes).
_base_ = '../seg/sem_fpn/fpn_evt-t_8xb2-80k_ade20k-512x512.py'

data_root = 'data/demo/'
metainfo = dict(classes=('background', 'circle', 'square', 'triangle'),
                palette=[[120, 120, 120], [220, 20, 60], [0, 128, 255], [255, 200, 0]])
crop_size = (128, 128)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=[32, 64, 128, 256], depths=[1, 1, 2, 1],
                  num_heads=[2, 2, 4, 8], heads_ranges=[4, 4, 6, 6], mlp_ratios=2,
                  mixers=['group_dilate', 'group_dilate', 'full', 'full'], group_sizes=64),
        drop_path_rate=0.,
        norm_cfg=dict(type='BN'),
        init_cfg=None),  # no ImageNet weights offline: trained from scratch
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=64),
    decode_head=dict(in_channels=[64, 64, 64, 64], channels=64, num_classes=4,
                     norm_cfg=dict(type='BN', requires_grad=True)))

train_pipeline = [
    dict(_scope_='mmseg', type='LoadImageFromFile'),
    dict(_scope_='mmseg', type='LoadAnnotations', reduce_zero_label=True),
    dict(_scope_='mmseg',
         type='RandomResize', scale=crop_size, ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(_scope_='mmseg', type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.95),
    dict(_scope_='mmseg', type='RandomFlip', prob=0.5),
    dict(_scope_='mmseg', type='PackSegInputs'),
]
test_pipeline = [
    dict(_scope_='mmseg', type='LoadImageFromFile'),
    dict(_scope_='mmseg', type='Resize', scale=crop_size, keep_ratio=True),
    dict(_scope_='mmseg', type='LoadAnnotations', reduce_zero_label=True),
    dict(_scope_='mmseg', type='PackSegInputs'),
]
# ADE20KDataset fixes its 150 class names; the same layout with our 4 classes is a
# BaseSegDataset with ADE20K's suffixes and reduce_zero_label.
dataset = dict(_scope_='mmseg', type='BaseSegDataset', data_root=data_root, metainfo=metainfo,
               img_suffix='.jpg', seg_map_suffix='.png', reduce_zero_label=True)
train_dataloader = dict(batch_size=8, num_workers=1,
                        dataset=dict(**dataset, pipeline=train_pipeline))
val_dataloader = dict(batch_size=8, num_workers=1,
                      dataset=dict(**dataset, pipeline=test_pipeline))
test_dataloader = val_dataloader

max_iters = 1200
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=1e-4))
param_scheduler = [
    dict(_scope_='mmseg', type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(_scope_='mmseg',
         type='PolyLR', eta_min=0.0, power=0.9, begin=50, end=max_iters, by_epoch=False),
]
default_hooks = dict(logger=dict(interval=20),
                     checkpoint=dict(by_epoch=False, interval=max_iters),
                     visualization=dict(interval=1))  # --show-dir draws every val image
# fixed seed: docs/demo.md's numbers come from a run of this config
randomness = dict(seed=0)
