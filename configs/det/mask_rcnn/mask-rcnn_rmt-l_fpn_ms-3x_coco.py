# RMT-L: the evt-t config of this family with the backbone swapped.
_base_ = './mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/rmt-l_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-l', init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[112, 224, 448, 640]))
optim_wrapper = dict(optimizer=dict(lr=1e-4))
