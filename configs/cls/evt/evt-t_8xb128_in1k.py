# EVT-T on ImageNet-1k at 224, the paper's recipe: AdamW lr 1e-3 at batch 1024
# (8 GPUs x 128; --auto-scale-lr rescales for other batches), wd 0.05 without decay on
# norms, biases and other 1-D params, cosine with 20 warm-up epochs, 300 epochs, DeiT
# augmentation (RandAugment rand-m9-mstd0.5-inc1, Mixup 0.8, CutMix 1.0, random erasing
# 0.25), label smoothing 0.1, EMA, drop path 0.1.
# Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python tools/train.py
# THIS_CONFIG --launcher slurm (see docs/reliability.md).
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(type='EVT', arch='evt-t', out_indices=(3, ), out_norm_cfg=None,
                  drop_path_rate=0.1),
    neck=dict(type='RMTClsNeck', in_channels=512, hidden_channels=1024),
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=1024,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        topk=(1, 5)),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02, bias=0.),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))

train_dataloader = dict(batch_size=128)
val_dataloader = dict(batch_size=128)
test_dataloader = val_dataloader

custom_hooks = [dict(type='EMAHook', momentum=1e-4, priority='ABOVE_NORMAL')]
