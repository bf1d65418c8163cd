# EVT-Swin-B: the evt-t config of this family with the backbone swapped.
_base_ = './upernet_evt-t_8xb2-160k_ade20k-512x512.py'

pretrained = 'checkpoints/evt-swin-b_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-b', init_cfg=dict(checkpoint=pretrained)),
    decode_head=dict(in_channels=[128, 256, 512, 1024]),
    auxiliary_head=dict(in_channels=512))
