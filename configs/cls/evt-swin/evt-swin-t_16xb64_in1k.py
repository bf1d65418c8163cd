# EVT-Swin-T on ImageNet-1k at 224: Swin-T's own recipe, the paper's strictly aligned
# comparison, taken as is from mmpretrain's configs/swin_transformer/swin-tiny_16xb64_in1k.py:
# its model base (linear head on global average pooling, label smoothing 0.1, Mixup 0.8 /
# CutMix 1.0), data (DeiT augmentation, batch 1024 = 16 GPUs x 64) and schedule (AdamW
# lr 1e-3 at batch 1024, wd 0.05 without decay on norms / biases / 1-D params, 300 epochs,
# 20 warm-up epochs, cosine to 1e-5), gradient clipping at norm 5, drop path 0.2; no EMA,
# no repeated augmentation (Swin uses neither). Only the backbone differs: Swin's
# W-MSA / SW-MSA are EuSA-g / EuSA-d with group size 49 (= Swin's 7x7 window), and the last
# stage is full EuSA.
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmpretrain::_base_/models/swin_transformer/tiny_224.py',
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

model = dict(
    backbone=dict(_delete_=True, type='EVT', arch='evt-swin-t', out_indices=(3, ),
                  drop_path_rate=0.2),
    head=dict(in_channels=768))
optim_wrapper = dict(clip_grad=dict(max_norm=5.0))
