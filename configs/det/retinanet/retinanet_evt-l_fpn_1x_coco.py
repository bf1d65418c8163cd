# EVT-L: the evt-t config of this family with the backbone swapped.
_base_ = './retinanet_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-l_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-l', init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[224, 448, 640]))
