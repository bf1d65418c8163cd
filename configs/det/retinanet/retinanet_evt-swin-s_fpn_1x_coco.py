# RetinaNet + FPN, EVT-SWIN-S, 1x: the evt-swin-t config (Swin's recipe) with the
# backbone swapped; drop path 0.2 (Swin-S's detection value).
_base_ = './retinanet_evt-swin-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-swin-s_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-s', drop_path_rate=0.2, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[192, 384, 768]))
