# RMT-S: the evt-t config of this family with the backbone swapped.
_base_ = './fpn_evt-t_8xb2-80k_ade20k-512x512.py'

pretrained = 'checkpoints/rmt-s_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-s', init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[64, 128, 256, 512]))
