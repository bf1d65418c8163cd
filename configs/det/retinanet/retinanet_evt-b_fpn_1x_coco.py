# RetinaNet + FPN, EVT-B, 1x: the evt-t config of this family with the
# backbone swapped. The RMT authors' RMT-B recipe (EVT-B follows RMT-B):
# qhfan/RMT detect/configs/RMT/retinanet_m_1x.py: lr 4e-4.
# Drop path 0.4: EVT-B's ImageNet value (= RMT-B's, also in the
# authors' detection config).
_base_ = './retinanet_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-b_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-b', drop_path_rate=0.4, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[160, 320, 512]))
