# EVT-Swin-T: the evt-t config of this family (= mmseg's Swin UperNet
# recipe: AdamW 6e-5, wd 0.01, warm-up 1500, poly) with the backbone swapped; drop path
# 0.3 as mmseg's configs/swin/swin-*_upernet_8xb2-160k_ade20k-512x512.py.
_base_ = './upernet_evt-t_8xb2-160k_ade20k-512x512.py'

pretrained = 'checkpoints/evt-swin-t_in1k.pth'  # noqa: replace with your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-t', drop_path_rate=0.3, init_cfg=dict(checkpoint=pretrained)),
    decode_head=dict(in_channels=[96, 192, 384, 768]),
    auxiliary_head=dict(in_channels=384))
# Swin's rule, by name (mmseg's Swin UperNet configs): no decay on '*norm*' only
optim_wrapper = dict(paramwise_cfg=dict(
    _delete_=True, custom_keys={'norm': dict(decay_mult=0.)}))
