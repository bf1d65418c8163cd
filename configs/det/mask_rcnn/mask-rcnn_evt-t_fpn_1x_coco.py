# Mask R-CNN + FPN with an EVT-T backbone, 1x schedule: the shared recipe of this folder.
# Every number follows the RMT authors' config of the same size (qhfan/RMT
# detect/configs/RMT/maskrcnn_t_1x.py; EVT-T follows RMT-T):
#   AdamW lr 4e-4 (T/S/B; L 2e-4), betas (0.9, 0.999), weight decay 0.05, none on norms;
#   linear warm-up 500 iterations from 0.001 x lr, 12 epochs, lr x0.1 after epochs 8 and 11
#   (mmdet's schedule_1x, as theirs); single-scale 1333 x 800 training with flip 0.5
#   (mmdet's coco_instance, as theirs); batch 16 = 8 GPUs x 2 images (theirs);
#   drop path = the backbone's ImageNet value (theirs: 0.1 / 0.15 / 0.4 / 0.5 for T/S/B/L);
#   SyncBN in the conv stem and downsampling (their detection backbone's).
# Differences from theirs: fp32 by default (they trained with fp16: add --amp to
# tools/train.py); mmdet 3.3 instead of their mmdet 2.x. docs/detection.md lists each config.
# Other total batches: pass --auto-scale-lr to scale the lr linearly (auto_scale_lr below).
# Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python tools/train.py
# THIS_CONFIG --launcher slurm (see docs/cluster.md).
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

# ImageNet-1k checkpoint of the backbone: replace with your file (an mmevt classifier
# checkpoint, e.g. from tools/model_converters/rmt_to_mmevt.py or configs/cls/*).
pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa
model = dict(
    backbone=dict(
        _delete_=True,
        type='EVT',
        arch='evt-t',
        drop_path_rate=0.1,  # EVT-T's ImageNet value (= RMT-T's, authors' det config)
        out_indices=(0, 1, 2, 3),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[64, 128, 256, 512]))

optim_wrapper = dict(
    _scope_='mmdet',
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=4e-4, betas=(0.9, 0.999), weight_decay=0.05),
    # The authors' rule, by name: no decay on parameters named '*norm*' (their block,
    # downsampling and output norms). Their stem's BNs are named patch_embed.proj.N and
    # decay; ours are named stem.N.norm, hence the longer key, which matches first.
    paramwise_cfg=dict(custom_keys={'backbone.stem': dict(decay_mult=1.),
                                    'norm': dict(decay_mult=0.)}),
    clip_grad=None)
auto_scale_lr = dict(enable=False, base_batch_size=16)
