# Cascade Mask R-CNN + FPN, RMT-B, ms-3x: the evt-t config of this family
# with the backbone swapped. The RMT authors' RMT-B recipe:
# qhfan/RMT detect/configs/RMT/casrcnn_m_3x.py: lr 2e-4.
# Drop path 0.4: the authors' ImageNet and detection value for RMT-B.
# Output norms: LayerNorm eps 1e-5 like the authors' detection backbone (their
# extra_norms are nn.LayerNorm defaults), so their COCO checkpoints load as they are.
_base_ = './cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/rmt-b_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-b', drop_path_rate=0.4, init_cfg=dict(checkpoint=pretrained),
                  out_norm_cfg=dict(type='LN', eps=1e-5)),
    neck=dict(in_channels=[80, 160, 320, 512]))
optim_wrapper = dict(optimizer=dict(lr=2e-4))
