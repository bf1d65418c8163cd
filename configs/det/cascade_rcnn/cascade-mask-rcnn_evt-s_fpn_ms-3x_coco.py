# Cascade Mask R-CNN + FPN, EVT-S, ms-3x: the evt-t config of this family
# with the backbone swapped. The RMT authors' RMT-S recipe (EVT-S follows RMT-S):
# qhfan/RMT detect/configs/RMT/casrcnn_s_3x.py: lr 4e-4.
# Drop path 0.15: EVT-S's ImageNet value (= RMT-S's, also in the
# authors' detection config).
_base_ = './cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/evt-s_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-s', drop_path_rate=0.15, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[64, 128, 256, 512]))
