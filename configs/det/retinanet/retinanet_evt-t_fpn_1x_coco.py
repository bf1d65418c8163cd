# RetinaNet + FPN with an EVT-T backbone, 1x schedule: the shared recipe of this folder,
# following the RMT authors (qhfan/RMT detect/configs/RMT/retinanet_t_1x.py; EVT-T follows
# RMT-T): AdamW lr 4e-4 (T/S/B; L 2e-4), weight decay 1e-4 on every parameter (their
# optimizer has no exclusions), warm-up 500 iterations, 12 epochs with steps 8 / 11
# (mmdet's schedule_1x, as theirs), batch 16 = 8 GPUs x 2 images, drop path = the
# backbone's ImageNet value, SyncBN in the stem and downsampling.
# Backbone outputs: stages 2-4 into FPN with start_level 0 (theirs: all 4 outputs and
# start_level 1, which leaves stage 1 unused: the same network without the unused norm).
# Differences from theirs: fp32 by default (they trained with fp16, loss scale 512: add
# --amp); mmdet 3.3. Multi-GPU: tools/dist_train.sh THIS_CONFIG 8; Slurm: srun ... python
# tools/train.py THIS_CONFIG --launcher slurm (see docs/cluster.md).
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    'mmdet::_base_/datasets/coco_detection.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(
        _delete_=True,
        type='EVT',
        arch='evt-t',
        drop_path_rate=0.1,  # EVT-T's ImageNet value (= RMT-T's)
        out_indices=(1, 2, 3),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[128, 256, 512], start_level=0, add_extra_convs='on_input'))

optim_wrapper = dict(
    _scope_='mmdet',
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=4e-4, betas=(0.9, 0.999), weight_decay=1e-4),
    clip_grad=None)
auto_scale_lr = dict(enable=False, base_batch_size=16)

# Test-time augmentation (`tools/test.py CONFIG CKPT --tta`): mmdet's RetinaNet TTA
# (configs/retinanet/retinanet_tta.py, restated with mmdet 3.3's backend_args): three
# scales x horizontal flip, boxes merged by NMS at IoU 0.5, 100 per image. Every config of
# this folder inherits it. Box-only: mmdet 3.3's DetTTAModel cannot merge instance masks,
# so the Mask R-CNN / Cascade configs have no TTA (docs/detection.md).
tta_model = dict(
    _scope_='mmdet',
    type='DetTTAModel',
    tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100))
tta_img_scales = [(1333, 800), (666, 400), (2000, 1200)]
tta_pipeline = [
    dict(_scope_='mmdet', type='LoadImageFromFile', backend_args=None),
    dict(_scope_='mmdet',
         type='TestTimeAug',
         transforms=[
             [dict(type='Resize', scale=s, keep_ratio=True) for s in tta_img_scales],
             [dict(type='RandomFlip', prob=1.), dict(type='RandomFlip', prob=0.)],
             [dict(type='PackDetInputs',
                   meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                              'scale_factor', 'flip', 'flip_direction'))],
         ]),
]
