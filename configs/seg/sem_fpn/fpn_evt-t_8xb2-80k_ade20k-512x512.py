# Semantic FPN with an EVT-T backbone on ADE20K, 512x512 crops, 80k iterations: the RMT
# authors' recipe (qhfan/RMT segmentation/configs/RMT/RMT_FPN_t_1x.py and their
# _base_/schedules/schedule_80k.py): AdamW lr 1e-4 wd 1e-4 on every parameter (their
# optimizer has no exclusions), poly decay (power 0.9) to 1e-6, no warm-up. Batch 16 in total (8 GPUs x 2 images).
# Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python tools/train.py
# THIS_CONFIG --launcher slurm (see docs/cluster.md).
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmseg::_base_/models/fpn_r50.py',
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_80k.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

crop_size = (512, 512)
# ImageNet-1k checkpoint of the backbone: replace with your file.
pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa
model = dict(
    data_preprocessor=dict(size=crop_size),
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='EVT',
        arch='evt-t',
        out_indices=(0, 1, 2, 3),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[64, 128, 256, 512]),
    decode_head=dict(num_classes=150))

optim_wrapper = dict(
    _scope_='mmseg',
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=1e-4),
    clip_grad=None)
param_scheduler = [
    dict(_scope_='mmseg',
         type='PolyLR', eta_min=1e-6, power=0.9, begin=0, end=80000, by_epoch=False)
]
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)

# Multi-scale (0.5-1.75) + flip testing: `tools/test.py CONFIG CKPT --tta` uses the
# tta_pipeline of mmseg's ade20k.py base.
