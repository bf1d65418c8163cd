# RetinaNet + FPN, RMT-T, 1x: the evt-t config of this family with the
# backbone swapped. The RMT authors' RMT-T recipe:
# qhfan/RMT detect/configs/RMT/retinanet_t_1x.py: lr 4e-4.
# Drop path 0.1: the authors' ImageNet and detection value for RMT-T.
# Output norms: LayerNorm eps 1e-5 like the authors' detection backbone (their
# extra_norms are nn.LayerNorm defaults), so their COCO checkpoints load as they are.
_base_ = './retinanet_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/rmt-t_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-t', drop_path_rate=0.1, init_cfg=dict(checkpoint=pretrained),
                  out_norm_cfg=dict(type='LN', eps=1e-5)),
    neck=dict(in_channels=[128, 256, 512]))
