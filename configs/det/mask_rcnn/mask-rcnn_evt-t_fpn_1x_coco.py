# Mask R-CNN + FPN with an EVT-T backbone, 1x schedule (12 epochs, steps 8 and 11).
# Batch: 16 images in total (8 GPUs x 2 images); with another total batch, pass
# --auto-scale-lr to tools/train.py to scale the lr linearly (auto_scale_lr below).
# Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python tools/train.py
# THIS_CONFIG --launcher slurm (see docs/reliability.md).
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

# ImageNet-1k checkpoint of the backbone: replace with your file (an mmevt classifier
# checkpoint, e.g. from tools/model_converters/rmt_to_mmevt.py or configs/cls/*).
pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa
model = dict(
    backbone=dict(
        _delete_=True,
        type='EVT',
        arch='evt-t',
        out_indices=(0, 1, 2, 3),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[64, 128, 256, 512]))

# AdamW, no weight decay on norms (BN/LN) and biases of norms.
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(norm_decay_mult=0.),
    clip_grad=None)
auto_scale_lr = dict(enable=False, base_batch_size=16)
