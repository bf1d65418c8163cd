# Cascade Mask R-CNN + FPN, RMT-S, ms-3x: the evt-t config of this family
# with the backbone swapped. The RMT authors' RMT-S recipe:
# qhfan/RMT detect/configs/RMT/casrcnn_s_3x.py: lr 4e-4.
# Drop path 0.15: the authors' ImageNet and detection value for RMT-S.
# Output norms: LayerNorm eps 1e-5 like the authors' detection backbone (their
# extra_norms are nn.LayerNorm defaults), so their COCO checkpoints load as they are.
_base_ = './cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/rmt-s_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-s', drop_path_rate=0.15, init_cfg=dict(checkpoint=pretrained),
                  out_norm_cfg=dict(type='LN', eps=1e-5)),
    neck=dict(in_channels=[64, 128, 256, 512]))
