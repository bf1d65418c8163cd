# RetinaNet + FPN with an EVT-T backbone, 1x schedule. Batch 16 (8 GPUs x 2 images).
# Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python tools/train.py
# THIS_CONFIG --launcher slurm (see docs/reliability.md).
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    'mmdet::_base_/datasets/coco_detection.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(
        _delete_=True,
        type='EVT',
        arch='evt-t',
        out_indices=(1, 2, 3),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[128, 256, 512], start_level=0, add_extra_convs='on_input'))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=1e-4),
    paramwise_cfg=dict(norm_decay_mult=0.),
    clip_grad=None)
auto_scale_lr = dict(enable=False, base_batch_size=16)
