# RetinaNet + FPN, EVT-L, 1x: the evt-t config of this family with the
# backbone swapped. The RMT authors' RMT-L recipe (EVT-L follows RMT-L):
# qhfan/RMT detect/configs/RMT/retinanet_l_1x.py: lr 2e-4.
# Drop path 0.55: EVT-L's ImageNet value (paper); like the authors, detection
# reuses the backbone's ImageNet drop path (RMT-L: 0.5).
_base_ = './retinanet_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-l_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-l', drop_path_rate=0.55, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[224, 448, 640]))
optim_wrapper = dict(optimizer=dict(lr=2e-4))
