# Cascade Mask R-CNN + FPN, EVT-B, ms-3x: the evt-t config of this family
# with the backbone swapped. The RMT authors' RMT-B recipe (EVT-B follows RMT-B):
# qhfan/RMT detect/configs/RMT/casrcnn_m_3x.py: lr 2e-4.
# Drop path 0.4: EVT-B's ImageNet value (= RMT-B's, also in the
# authors' detection config).
_base_ = './cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/evt-b_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-b', drop_path_rate=0.4, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[80, 160, 320, 512]))
optim_wrapper = dict(optimizer=dict(lr=2e-4))
