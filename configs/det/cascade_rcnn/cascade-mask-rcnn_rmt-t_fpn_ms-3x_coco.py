# Cascade Mask R-CNN + FPN, RMT-T, ms-3x: the evt-t config of this family
# with the backbone swapped. lr 4e-4: ours (from S): the authors have no T cascade config;
# their S (qhfan/RMT detect/configs/RMT/casrcnn_s_3x.py) uses 4e-4.
# Drop path 0.1: the authors' ImageNet and detection value for RMT-T.
# Output norms: LayerNorm eps 1e-5 like the authors' detection backbone (their
# extra_norms are nn.LayerNorm defaults), so their COCO checkpoints load as they are.
_base_ = './cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/rmt-t_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-t', drop_path_rate=0.1, init_cfg=dict(checkpoint=pretrained),
                  out_norm_cfg=dict(type='LN', eps=1e-5)),
    neck=dict(in_channels=[64, 128, 256, 512]))
