# RMT-T: the evt-t config of this family with the backbone swapped.
_base_ = './cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/rmt-t_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-t', init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[64, 128, 256, 512]))
