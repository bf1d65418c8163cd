# EVT-B fine-tuned at 384x384 from its 224 ImageNet-1k checkpoint, 30 epochs, AdamW lr 4e-5
# at batch 1024 (Swin's fine-tuning recipe: 2e-5 at 512), wd 1e-8, 5 warm-up epochs from
# 1e-3 x lr, cosine to 4e-7 (Swin: warm-up lr 2e-8 and min lr 2e-7 at 512).
# Like Swin's fine-tuning, no EMA and no repeated augmentation (both are the 224 recipe's);
# gradients clipped at norm 5.0 (Swin's config.py TRAIN.CLIP_GRAD, also mmpretrain's
# swin_transformer/swin-base_16xb64_in1k-384px.py).
# Nothing is interpolated: the spatial decay is computed from the 12x12 grid at run time.
_base_ = './evt-b_8xb128_in1k.py'

load_from = 'checkpoints/evt-b_in1k.pth'  # noqa: the 224 checkpoint to start from

bgr_mean = [103.53, 116.28, 123.675]
train_pipeline = [
    dict(_scope_='mmpretrain', type='LoadImageFromFile'),
    dict(_scope_='mmpretrain',
         type='RandomResizedCrop', scale=384, backend='pillow', interpolation='bicubic'),
    dict(_scope_='mmpretrain', type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(_scope_='mmpretrain',
         type='RandAugment', policies='timm_increasing', num_policies=2, total_level=10,
         magnitude_level=9, magnitude_std=0.5,
         hparams=dict(pad_val=[round(x) for x in bgr_mean], interpolation='bicubic')),
    dict(_scope_='mmpretrain',
         type='RandomErasing', erase_prob=0.25, mode='rand', min_area_ratio=0.02,
         max_area_ratio=1 / 3, fill_color=bgr_mean, fill_std=[57.375, 57.12, 58.395]),
    dict(_scope_='mmpretrain', type='PackInputs'),
]
test_pipeline = [
    dict(_scope_='mmpretrain', type='LoadImageFromFile'),
    dict(_scope_='mmpretrain',
         type='Resize', scale=384, backend='pillow', interpolation='bicubic'),
    dict(_scope_='mmpretrain', type='PackInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline),
                        sampler=dict(type='DefaultSampler', shuffle=True))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(optimizer=dict(lr=4e-5, weight_decay=1e-8),
                     clip_grad=dict(max_norm=5.0))
param_scheduler = [
    dict(_scope_='mmpretrain',
         type='LinearLR', start_factor=1e-3, by_epoch=True, end=5, convert_to_iter_based=True),
    dict(_scope_='mmpretrain', type='CosineAnnealingLR', eta_min=4e-7, by_epoch=True, begin=5),
]
train_cfg = dict(max_epochs=30)
custom_hooks = []
