# RetinaNet + FPN, EVT-SWIN-T, 1x: Swin's recipe, as the paper's strictly aligned comparison
# asks: AdamW lr 1e-4, wd 0.05 with no decay on norms (the Swin paper's detection
# optimizer; mmdet's configs/swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py keeps its 1x
# schedule: warm-up 500 iterations, as here), drop path 0.2, outputs of stages 2-4.
_base_ = './retinanet_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-swin-t_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-t', drop_path_rate=0.2, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[192, 384, 768]))
optim_wrapper = dict(optimizer=dict(lr=1e-4, weight_decay=0.05),
                     paramwise_cfg=dict(norm_decay_mult=0.))
