# EVT-Swin-S on ImageNet-1k at 224: evt-swin-t_16xb64_in1k.py (Swin's recipe) with the
# backbone swapped; drop path 0.3 as mmpretrain's configs/swin_transformer/swin-small_16xb64_in1k.py
# (its model base differs from Swin-T's only in the backbone, and the head's input for B).
_base_ = './evt-swin-t_16xb64_in1k.py'

model = dict(
    backbone=dict(arch='evt-swin-s', drop_path_rate=0.3),
    head=dict(in_channels=768))
