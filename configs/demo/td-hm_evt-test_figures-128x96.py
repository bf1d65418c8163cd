# Top-down heatmap pose estimation with the tiny evt-test backbone on the generated
# keypoint figures (data/demo_pose, made by tools/misc/make_shapes.py --keypoints or
# mmevt.datasets.generate_keypoints), CPU-sized: the COCO recipe of
# ../pose/topdown_heatmap/td-hm_evt-t_8xb32-210e_coco-256x192.py (mmpose's Swin-T one) at
# 128 x 96 crops, trained from scratch for a few epochs; docs/pose.md.
# 128 x 96: half of COCO's 256 x 192 (same aspect), both sides multiples of 32, so the
# stride-32 map (4 x 3) upsampled x8 by the head is the codec's 32 x 24 heatmap exactly.
_base_ = '../pose/topdown_heatmap/td-hm_evt-t_8xb32-210e_coco-256x192.py'

data_root = 'data/demo_pose/'
codec = dict(type='MSRAHeatmap', input_size=(96, 128), heatmap_size=(24, 32), sigma=2)
model = dict(
    backbone=dict(
        arch='evt-test',
        drop_path_rate=0.,  # evt-test's (our arch table): a few epochs, nothing to regularise
        norm_cfg=dict(type='BN'),  # one process
        init_cfg=None),  # no ImageNet weights offline: trained from scratch
    head=dict(in_channels=128,  # evt-test's last-stage width
              deconv_out_channels=(64, 64, 64),  # ours: CPU-sized (the recipe's 256)
              decoder=codec))

# Typed dicts say their scope, so a config inheriting this one as 'mmevt::demo/...' does not
# look them up in a scope 'mmevt' (mmengine stamps a package's name on inherited dicts).
# The recipe's pipelines at 128 x 96, without half-body and bbox jitter (a few epochs on
# one figure per image; the flip stays: symmetric joint colours keep it consistent).
train_pipeline = [
    dict(_scope_='mmpose', type='LoadImage'),
    dict(_scope_='mmpose', type='GetBBoxCenterScale'),
    dict(_scope_='mmpose', type='RandomFlip', direction='horizontal'),
    dict(_scope_='mmpose', type='TopdownAffine', input_size=codec['input_size']),
    dict(_scope_='mmpose', type='GenerateTarget', encoder=codec),
    dict(_scope_='mmpose', type='PackPoseInputs')
]
val_pipeline = [
    dict(_scope_='mmpose', type='LoadImage'),
    dict(_scope_='mmpose', type='GetBBoxCenterScale'),
    dict(_scope_='mmpose', type='TopdownAffine', input_size=codec['input_size']),
    dict(_scope_='mmpose', type='PackPoseInputs')
]
train_dataloader = dict(
    batch_size=16, num_workers=1,
    dataset=dict(data_root=data_root, ann_file='annotations/person_keypoints_training.json',
                 data_prefix=dict(img='images/training/'), pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=16, num_workers=1,
    dataset=dict(data_root=data_root, ann_file='annotations/person_keypoints_validation.json',
                 bbox_file=None,  # boxes from the ground truth: no detector here
                 data_prefix=dict(img='images/validation/'), pipeline=val_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/person_keypoints_validation.json')
test_evaluator = val_evaluator

max_epochs = 20
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
optim_wrapper = dict(optimizer=dict(lr=2e-3))  # ours: a tiny model from scratch, batch 16
param_scheduler = [
    dict(_scope_='mmpose', type='LinearLR', begin=0, end=20, start_factor=0.01,
         by_epoch=False),  # warm-up
    dict(_scope_='mmpose', type='CosineAnnealingLR', T_max=max_epochs, eta_min=1e-5,
         begin=0, end=max_epochs, by_epoch=True),
]
auto_scale_lr = dict(base_batch_size=16)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs))
# fixed seed: docs/pose.md's numbers come from a run of this config
randomness = dict(seed=0)
