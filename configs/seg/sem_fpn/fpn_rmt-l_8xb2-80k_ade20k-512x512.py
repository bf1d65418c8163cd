# RMT-L: the evt-t config of this family with the backbone swapped.
# Output norms: LayerNorm eps 1e-5 like the authors' segmentation backbone (nn.LayerNorm
# defaults), so their ADE20K checkpoints load as they are.
_base_ = './fpn_evt-t_8xb2-80k_ade20k-512x512.py'

pretrained = 'checkpoints/rmt-l_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-l', init_cfg=dict(checkpoint=pretrained),
                  out_norm_cfg=dict(type='LN', eps=1e-5)),
    neck=dict(in_channels=[112, 224, 448, 640]))
