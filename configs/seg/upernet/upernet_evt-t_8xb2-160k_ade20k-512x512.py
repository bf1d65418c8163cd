# UperNet (+ auxiliary FCN head on stage 3) with an EVT-T backbone on ADE20K, 512x512
# crops, 160k iterations, AdamW lr 6e-5 wd 0.01, 1500 linear warm-up iterations, poly
# decay (power 1). Batch 16 in total (8 GPUs x 2 images).
# Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python tools/train.py
# THIS_CONFIG --launcher slurm (see docs/cluster.md).
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmseg::_base_/models/upernet_r50.py',
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_160k.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

crop_size = (512, 512)
pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa: replace with your ImageNet checkpoint
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
    decode_head=dict(in_channels=[64, 128, 256, 512], num_classes=150),
    auxiliary_head=dict(in_channels=256, in_index=2, num_classes=150))

optim_wrapper = dict(
    _scope_='mmseg',
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.01),
    # The authors' rule (segmentation/configs/RMT/RMT_Uper_*_2x.py), by name: no decay
    # on parameters named '*norm*'; their stem's BNs (patch_embed.proj.N) and the heads'
    # BNs ('bn') decay. Ours are named stem.N.norm, hence the longer key.
    paramwise_cfg=dict(custom_keys={'backbone.stem': dict(decay_mult=1.),
                                    'norm': dict(decay_mult=0.)}),
    clip_grad=None)
param_scheduler = [
    dict(_scope_='mmseg', type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(_scope_='mmseg',
         type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False),
]
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)

# Multi-scale (0.5-1.75) + flip testing: `tools/test.py CONFIG CKPT --tta` uses the
# tta_pipeline of mmseg's ade20k.py base.
