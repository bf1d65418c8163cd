# TSN with the tiny evt-test backbone on the generated moving-shapes clips (data/demo_action,
# made by tools/misc/make_shapes.py --rawframes or mmevt.datasets.generate_rawframes: 4
# classes, 8 frames of 64 x 64 a clip), CPU-sized: the Kinetics recipe of
# ../action/tsn/tsn_evt-t_8xb32-1x1x3-100e_kinetics400-rgb.py (mmaction2's TSN one) on frames
# read from rawframes, at 64 x 64, trained from scratch for a few epochs; docs/action.md.
_base_ = '../action/tsn/tsn_evt-t_8xb32-1x1x3-100e_kinetics400-rgb.py'

data_root = 'data/demo_action/'
model = dict(
    backbone=dict(
        arch='evt-test',
        drop_path_rate=0.,  # evt-test's (our arch table): a few epochs, nothing to regularise
        init_cfg=None),  # no ImageNet weights offline: trained from scratch
    cls_head=dict(num_classes=4,  # the generated classes (mmevt.datasets.ACTION_CLASSES)
                  in_channels=128))  # evt-test's last-stage width

# Typed dicts say their scope, so a config inheriting this one as 'mmevt::demo/...' does not
# look them up in a scope 'mmevt' (mmengine stamps a package's name on inherited dicts).
# The recipe's pipelines with frames decoded from files (RawFrameDecode, not a video
# decoder) and its sizes scaled from 256 / 224 to 64: 3 segments of 1 frame; multi-scale
# crop and flip in training; a centre crop of 3 segments in validation and test (the
# recipe tests 25 segments x ten crops: ours, a demo's evaluation at its validation cost).
train_pipeline = [
    dict(_scope_='mmaction', type='SampleFrames', clip_len=1, frame_interval=1, num_clips=3),
    dict(_scope_='mmaction', type='RawFrameDecode'),
    dict(_scope_='mmaction', type='Resize', scale=(-1, 64)),
    dict(_scope_='mmaction', type='MultiScaleCrop', input_size=64,
         scales=(1, 0.875, 0.75, 0.66), random_crop=False, max_wh_scale_gap=1),
    dict(_scope_='mmaction', type='Resize', scale=(64, 64), keep_ratio=False),
    dict(_scope_='mmaction', type='Flip', flip_ratio=0.5),
    dict(_scope_='mmaction', type='FormatShape', input_format='NCHW'),
    dict(_scope_='mmaction', type='PackActionInputs')
]
val_pipeline = [
    dict(_scope_='mmaction', type='SampleFrames', clip_len=1, frame_interval=1, num_clips=3,
         test_mode=True),
    dict(_scope_='mmaction', type='RawFrameDecode'),
    dict(_scope_='mmaction', type='Resize', scale=(-1, 64)),
    dict(_scope_='mmaction', type='CenterCrop', crop_size=64),
    dict(_scope_='mmaction', type='FormatShape', input_format='NCHW'),
    dict(_scope_='mmaction', type='PackActionInputs')
]
train_dataloader = dict(
    batch_size=8, num_workers=1,
    dataset=dict(_scope_='mmaction', type='RawframeDataset', data_root=data_root,
                 ann_file='train_list_rawframes.txt', data_prefix=dict(img='rawframes'),
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=8, num_workers=1,
    dataset=dict(_scope_='mmaction', type='RawframeDataset', data_root=data_root,
                 ann_file='val_list_rawframes.txt', data_prefix=dict(img='rawframes'),
                 pipeline=val_pipeline))
test_dataloader = val_dataloader

max_epochs = 12
train_cfg = dict(max_epochs=max_epochs, val_begin=max_epochs, val_interval=max_epochs)
optim_wrapper = dict(optimizer=dict(lr=0.05))  # ours: a tiny model from scratch, batch 8
param_scheduler = [
    dict(_scope_='mmaction', type='LinearLR', begin=0, end=20, start_factor=0.01,
         by_epoch=False),  # warm-up
    dict(_scope_='mmaction', type='CosineAnnealingLR', T_max=max_epochs, eta_min=1e-4,
         begin=0, end=max_epochs, by_epoch=True),
]
auto_scale_lr = dict(base_batch_size=8)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs))
# fixed seed: docs/action.md's numbers come from a run of this config
randomness = dict(seed=0)
