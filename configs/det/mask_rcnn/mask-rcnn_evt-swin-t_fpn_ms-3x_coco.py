# Mask R-CNN + FPN, EVT-SWIN-T, ms-3x: Swin's own recipe, as the paper's strictly aligned
# comparison asks (mmdet's configs/swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py):
# AdamW lr 1e-4, wd 0.05 (none on norms), warm-up 1000 iterations, drop path 0.2;
# the rest as the evt-t config of this family (same schedule, data and batch 16).
_base_ = './mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/evt-swin-t_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-t', drop_path_rate=0.2, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[96, 192, 384, 768]))
optim_wrapper = dict(
    optimizer=dict(lr=1e-4),
    # Swin's rule, by name: no decay on parameters named '*norm*' (Swin's configs)
    paramwise_cfg=dict(_delete_=True, custom_keys={'norm': dict(decay_mult=0.)}))
param_scheduler = _base_.ms_crop_swin_param_scheduler
