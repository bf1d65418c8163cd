# EVT-T on ImageNet-1k at 224. The recipe is the RMT authors' (their
# classfication_release/main.py defaults and RMT_log/*.txt; the paper says it follows
# DeiT / Swin), which this file states for mmpretrain:
#   AdamW lr 1e-3 at batch 1024 = 8 GPUs x 128 (their logs peak at 2e-3 with a total batch
#   of 2048: the same lr per image), wd 0.05 with no decay on norms, biases and other 1-D
#   params except layer-scale gammas (below), 300 epochs, cosine to 1e-5 after 5 linear warm-up epochs from 1e-6 (their
#   logs; mmpretrain's Swin schedule, inherited below, warms up for 20);
#   DeiT augmentation: RandAugment rand-m9-mstd0.5-inc1, Mixup 0.8, CutMix 1.0, random
#   erasing 0.25, label smoothing 0.1 (mmpretrain's imagenet_bs64_swin_224 data base);
#   repeated augmentation (DeiT's RASampler = mmpretrain's RepeatAugSampler, 3 repeats);
#   EMA of weights and buffers with decay 0.99996 ** (batch / 512) per step, i.e.
#   momentum 1 - 0.99996 ** 2 = 8e-5 at batch 1024 (their model_ema). --auto-scale-lr
#   rescales the lr only: with another total batch B set the EMA momentum to
#   1 - 0.99996 ** (B / 512) yourself;
#   SyncBN for the whole model in multi-GPU runs (they convert every BN): sync_bn below;
#   drop path 0.1 (paper; = RMT-T's).
# The authors' README accuracy is the EMA weights' for S/B/L and the plain weights' for
# T; the EMAHook below evaluates the EMA weights.
# Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python tools/train.py
# THIS_CONFIG --launcher slurm (see docs/cluster.md).
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

model = dict(
    _scope_='mmpretrain',
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

train_dataloader = dict(batch_size=128, sampler=dict(type='RepeatAugSampler', shuffle=True))
val_dataloader = dict(batch_size=128)
test_dataloader = val_dataloader

param_scheduler = [
    dict(_scope_='mmpretrain',
         type='LinearLR', start_factor=1e-3, by_epoch=True, end=5, convert_to_iter_based=True),
    dict(_scope_='mmpretrain', type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5),
]
custom_hooks = [
    dict(_scope_='mmpretrain',
         type='EMAHook', momentum=8e-5, update_buffers=True, priority='ABOVE_NORMAL'),
]
sync_bn = 'torch'  # BN -> SyncBN in distributed runs (no effect in a single process)
# The authors' no-decay rule (timm's: 1-D tensors and biases) leaves their layer-scale
# gammas, stored as (1, 1, 1, C), decayed; ours are 1-D, so this key decays them too.
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.gamma': dict(decay_mult=1.0)}))
