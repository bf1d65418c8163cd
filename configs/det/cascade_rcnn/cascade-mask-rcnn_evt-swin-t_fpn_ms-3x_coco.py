# Cascade Mask R-CNN + FPN, EVT-SWIN-T, ms-3x: Swin's own recipe, as the paper's strictly
# aligned comparison asks (the Swin paper's Cascade Mask R-CNN setting; the heads, data and
# schedule of this family's evt-t config are Swin's too): AdamW lr 1e-4, wd 0.05 (none
# on norms), drop path 0.2. Warm-up 1000 iterations: ours. mmdet has no Swin Cascade
# config; this is the warm-up of mmdet's Swin Mask R-CNN 3x config
# (configs/swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py), kept for Swin's Cascade.
_base_ = './cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/evt-swin-t_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-t', drop_path_rate=0.2, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[96, 192, 384, 768]))
optim_wrapper = dict(
    optimizer=dict(lr=1e-4),
    # Swin's rule, by name: no decay on parameters named '*norm*' (Swin's configs)
    paramwise_cfg=dict(_delete_=True, custom_keys={'norm': dict(decay_mult=0.)}))
param_scheduler = _base_.ms_crop_swin_param_scheduler
