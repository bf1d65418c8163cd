# RMT-B: the evt-t config of this family with the backbone swapped.
# Output norms: LayerNorm eps 1e-5 like the authors' segmentation backbone (nn.LayerNorm
# defaults), so their ADE20K checkpoints load as they are.
_base_ = './upernet_evt-t_8xb2-160k_ade20k-512x512.py'

pretrained = 'checkpoints/rmt-b_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-b', init_cfg=dict(checkpoint=pretrained),
                  out_norm_cfg=dict(type='LN', eps=1e-5)),
    decode_head=dict(in_channels=[80, 160, 320, 512]),
    auxiliary_head=dict(in_channels=320))
