# Cascade Mask R-CNN + FPN with an EVT-T backbone, 3x schedule with Swin's "ms-crop"
# augmentation (../_base_/ms-crop-3x_coco-instance.py: 36 epochs, steps 27 / 33): the
# shared recipe of this folder, following the RMT authors (qhfan/RMT
# detect/configs/RMT/casrcnn_s_3x.py and their _base_/models/RMT_cas_rcnn.py):
#   heads: three ConvFCBBoxHead (4 shared 3x3 convs + 1 fc of 1024, SyncBN), GIoU loss
#   x10 on decoded boxes (reg_decoded_bbox), class-specific regression, target stds
#   0.1/0.2, 0.05/0.1, 0.033/0.067 per stage (also mmdet's
#   configs/convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py);
#   AdamW lr 4e-4 for T: ours (from S): the authors have no T cascade config, their S uses
#   4e-4 (B: 2e-4); wd 0.05, none on norms; warm-up 500 iterations; batch 16 = 8 GPUs x 2;
#   drop path = the backbone's ImageNet value; SyncBN in the stem and downsampling.
# Differences from theirs: fp32 by default (they trained with fp16: add --amp); mmdet 3.3.
# Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python tools/train.py
# THIS_CONFIG --launcher slurm (see docs/cluster.md).
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
    '../_base_/ms-crop-3x_coco-instance.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(
        _delete_=True,
        type='EVT',
        arch='evt-t',
        drop_path_rate=0.1,  # EVT-T's ImageNet value (= RMT-T's)
        out_indices=(0, 1, 2, 3),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[64, 128, 256, 512]),
    roi_head=dict(bbox_head=[
        dict(type='ConvFCBBoxHead',
             num_shared_convs=4,
             num_shared_fcs=1,
             in_channels=256,
             conv_out_channels=256,
             fc_out_channels=1024,
             roi_feat_size=7,
             num_classes=80,
             bbox_coder=dict(type='DeltaXYWHBBoxCoder', target_means=[0., 0., 0., 0.],
                             target_stds=[xy, xy, wh, wh]),
             reg_class_agnostic=False,
             reg_decoded_bbox=True,
             norm_cfg=dict(type='SyncBN', requires_grad=True),
             loss_cls=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
             loss_bbox=dict(type='GIoULoss', loss_weight=10.0))
        for xy, wh in [(0.1, 0.2), (0.05, 0.1), (0.033, 0.067)]
    ]))

train_dataloader = dict(dataset=dict(pipeline=_base_.ms_crop_train_pipeline))
optim_wrapper = dict(
    _scope_='mmdet',
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=4e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(norm_decay_mult=0.),  # their custom key 'norm': decay_mult 0
    clip_grad=None)
train_cfg = dict(max_epochs=_base_.ms_crop_max_epochs)
param_scheduler = _base_.ms_crop_param_scheduler
auto_scale_lr = dict(enable=False, base_batch_size=16)
