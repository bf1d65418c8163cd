# Oriented R-CNN with the tiny evt-test backbone on the generated aerial set (DOTA v1.0
# labelTxt, 2 classes: mmevt.datasets.generate_dota or tools/misc/make_shapes.py --dota),
# CPU-sized: the DOTA recipe of ../rotated/oriented_rcnn/oriented-rcnn-le90_evt-t_fpn_1x_dota.py
# (mmrotate's Swin-T one) on 128 x 128 patches cut from 256 x 256 images by mmrotate's own
# tools/data/dota/split/img_split.py (--sizes 128 --gaps 32: DOTA's 1024 / 200 scaled down),
# a slim FPN and heads, trained from scratch for a few epochs; docs/rotated.md.
_base_ = '../rotated/oriented_rcnn/oriented-rcnn-le90_evt-t_fpn_1x_dota.py'

data_root = 'data/demo_dota/'  # split/train, split/val: img_split.py's outputs
metainfo = dict(classes=('large-vehicle', 'ship'))  # mmevt.datasets.DOTA_CLASSES
model = dict(
    backbone=dict(
        arch='evt-test',
        drop_path_rate=0.,  # evt-test's (our arch table): a few epochs, nothing to regularise
        norm_cfg=dict(type='BN'),  # one process
        init_cfg=None),  # no ImageNet weights offline: trained from scratch
    neck=dict(in_channels=[16, 32, 64, 128], out_channels=64),  # evt-test's widths
    # anchors: the recipe's 8 x stride (32 pixels at stride 4) fit the objects (28-44 long)
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=2)),
    # ours, sized to a few objects a patch: fewer samples and proposals than DOTA's
    train_cfg=dict(rpn=dict(sampler=dict(num=128)),
                   rpn_proposal=dict(nms_pre=500, max_per_img=300),
                   rcnn=dict(sampler=dict(num=128))),
    test_cfg=dict(rpn=dict(nms_pre=300, max_per_img=100),
                  rcnn=dict(nms_pre=300, max_per_img=50)))

# Typed dicts say their scope, so a config inheriting this one as 'mmevt::demo/...' does not
# look them up in a scope 'mmevt'. The recipe's pipelines at 128 x 128.
img_scale = (128, 128)
train_pipeline = [
    dict(_scope_='mmdet', type='LoadImageFromFile'),
    dict(_scope_='mmdet', type='LoadAnnotations', with_bbox=True, box_type='qbox'),
    dict(_scope_='mmrotate', type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox')),
    dict(_scope_='mmdet', type='Resize', scale=img_scale, keep_ratio=True),
    dict(_scope_='mmdet', type='RandomFlip', prob=0.75,
         direction=['horizontal', 'vertical', 'diagonal']),
    dict(_scope_='mmdet', type='PackDetInputs')
]
val_pipeline = [
    dict(_scope_='mmdet', type='LoadImageFromFile'),
    dict(_scope_='mmdet', type='Resize', scale=img_scale, keep_ratio=True),
    dict(_scope_='mmdet', type='LoadAnnotations', with_bbox=True, box_type='qbox'),
    dict(_scope_='mmrotate', type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox')),
    dict(_scope_='mmdet', type='PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor'))
]
train_dataloader = dict(
    batch_size=8, num_workers=1,
    dataset=dict(_scope_='mmrotate', type='DOTADataset', data_root=data_root,
                 metainfo=metainfo, ann_file='split/train/annfiles/',
                 data_prefix=dict(img_path='split/train/images/'), pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=8, num_workers=1,
    dataset=dict(_scope_='mmrotate', type='DOTADataset', data_root=data_root,
                 metainfo=metainfo, ann_file='split/val/annfiles/',
                 data_prefix=dict(img_path='split/val/images/'), pipeline=val_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(_scope_='mmrotate', type='DOTAMetric', metric='mAP')  # rbox, IoU 0.5
test_evaluator = val_evaluator

max_epochs = 12
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
# ours: a tiny model from scratch at batch 8, the backbone at the heads' lr (nothing
# pretrained to keep); the recipe's no decay on norms
optim_wrapper = dict(optimizer=dict(lr=1e-3), paramwise_cfg=dict(_delete_=True,
                                                                 norm_decay_mult=0.0))
param_scheduler = [
    dict(_scope_='mmdet', type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(_scope_='mmdet', type='CosineAnnealingLR', T_max=max_epochs, eta_min=1e-5,
         by_epoch=True, begin=0, end=max_epochs),
]
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs))
# fixed seed: docs/rotated.md's numbers come from a run of this config
randomness = dict(seed=0)
