# RetinaNet + FPN, RMT-L, 1x: the evt-t config of this family with the
# backbone swapped. The RMT authors' RMT-L recipe:
# qhfan/RMT detect/configs/RMT/retinanet_l_1x.py: lr 2e-4.
# Drop path 0.5: the authors' ImageNet and detection value for RMT-L.
# Output norms: LayerNorm eps 1e-5 like the authors' detection backbone (their
# extra_norms are nn.LayerNorm defaults), so their COCO checkpoints load as they are.
_base_ = './retinanet_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/rmt-l_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-l', drop_path_rate=0.5, init_cfg=dict(checkpoint=pretrained),
                  out_norm_cfg=dict(type='LN', eps=1e-5)),
    neck=dict(in_channels=[224, 448, 640]))
optim_wrapper = dict(optimizer=dict(lr=2e-4))
