# RMT-B: the evt-t config of this family with the backbone swapped.
_base_ = './mask-rcnn_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/rmt-b_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-b', init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[80, 160, 320, 512]))
optim_wrapper = dict(optimizer=dict(lr=1e-4))
