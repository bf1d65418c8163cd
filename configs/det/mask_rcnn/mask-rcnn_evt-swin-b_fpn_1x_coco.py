# EVT-Swin-B: the evt-t config of this family with the backbone swapped.
_base_ = './mask-rcnn_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-swin-b_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-b', init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[128, 256, 512, 1024]))
optim_wrapper = dict(optimizer=dict(lr=1e-4))
