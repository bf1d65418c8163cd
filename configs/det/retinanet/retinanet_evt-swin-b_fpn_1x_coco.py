# RetinaNet + FPN, EVT-SWIN-B, 1x: the evt-swin-t config (Swin's recipe) with the
# backbone swapped; drop path 0.3 (Swin-B's detection value).
_base_ = './retinanet_evt-swin-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-swin-b_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-b', drop_path_rate=0.3, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[256, 512, 1024]))
