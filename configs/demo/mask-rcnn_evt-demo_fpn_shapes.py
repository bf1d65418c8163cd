# `make demo`: Mask R-CNN with a small EVT backbone on the generated shapes dataset
# (data/demo, made by tools/misc/make_shapes.py), CPU-sized: 128x128 images, slim FPN
# and heads.
_base_ = '../det/mask_rcnn/mask-rcnn_evt-t_fpn_1x_coco.py'

data_root = 'data/demo/'
metainfo = dict(classes=('circle', 'square', 'triangle'))
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=[32, 64, 128, 256], depths=[1, 1, 2, 1],
                  num_heads=[2, 2, 4, 8],
                  heads_ranges=[4, 4, 6, 6], mlp_ratios=2,
                  mixers=['group_dilate', 'group_dilate', 'full', 'full'], group_sizes=64),
        drop_path_rate=0.,
        norm_cfg=dict(type='BN'),
        init_cfg=None),  # no ImageNet weights offline: trained from scratch
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=64),
    rpn_head=dict(in_channels=64, feat_channels=64,
                  anchor_generator=dict(scales=[4], ratios=[1.0])),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=3),
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(in_channels=64, conv_out_channels=64, num_classes=3)),
    train_cfg=dict(
        rpn=dict(sampler=dict(num=128)),
        rpn_proposal=dict(nms_pre=500, max_per_img=300),
        rcnn=dict(sampler=dict(num=128))),
    test_cfg=dict(rpn=dict(nms_pre=300, max_per_img=100), rcnn=dict(max_per_img=20)))

img_scale = (128, 128)
train_pipeline = [
    dict(_scope_='mmdet', type='LoadImageFromFile'),
    dict(_scope_='mmdet', type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(_scope_='mmdet', type='Resize', scale=img_scale, keep_ratio=True),
    dict(_scope_='mmdet', type='RandomFlip', prob=0.5),
    dict(_scope_='mmdet', type='PackDetInputs'),
]
test_pipeline = [
    dict(_scope_='mmdet', type='LoadImageFromFile'),
    dict(_scope_='mmdet', type='Resize', scale=img_scale, keep_ratio=True),
    dict(_scope_='mmdet', type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(_scope_='mmdet', type='PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(
    batch_size=8, num_workers=1, persistent_workers=True,
    dataset=dict(data_root=data_root, metainfo=metainfo,
                 ann_file='annotations/instances_training.json',
                 data_prefix=dict(img='images/training/'), pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=8, num_workers=1, persistent_workers=True,
    dataset=dict(data_root=data_root, metainfo=metainfo,
                 ann_file='annotations/instances_validation.json',
                 data_prefix=dict(img='images/validation/'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_validation.json')
test_evaluator = val_evaluator

max_epochs = 10
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
optim_wrapper = dict(optimizer=dict(lr=1e-3))
param_scheduler = [
    dict(_scope_='mmdet', type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(_scope_='mmdet',
         type='CosineAnnealingLR', T_max=max_epochs, eta_min=1e-5, by_epoch=True, begin=0,
         end=max_epochs),
]
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs))
# fixed seed: docs/demo.md's numbers come from a run of this config
randomness = dict(seed=0)
