# EVT-Swin-T: the evt-t config of this family with the backbone swapped.
_base_ = './retinanet_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-swin-t_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-t', init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[192, 384, 768]))
