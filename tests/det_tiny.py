"""Shrink a real mmdet config of ours for CPU tests: tiny arch, small images, 8 images."""


def tiny_det_config(base: str, data_root: str, work_dir: str, max_epochs: int = 1,
                    family: str = 'mask_rcnn', arch: str = 'evt-test',
                    extra: str = '') -> str:
    """Config text inheriting ``base`` (absolute path) with tiny model and data.

    ``family``: ``mask_rcnn``, ``cascade`` (the cascade's list of bbox heads cannot be
    partially overridden in a child config: pass :data:`CASCADE_OPTS` to the tools) or
    ``retinanet``.
    """
    ann = 'annotations/instances_{}.json'
    mask = family != 'retinanet'
    with_mask = 'True' if mask else 'False'
    neck_channels = [16, 32, 64, 128] if mask else [32, 64, 128]
    heads = {
        'mask_rcnn': "roi_head=dict(bbox_head=dict(num_classes=3), "
                     "mask_head=dict(num_classes=3))",
        'cascade': "roi_head=dict(mask_head=dict(num_classes=3))",
        'retinanet': "bbox_head=dict(num_classes=3)",
    }[family]
    pack = "dict(type='PackDetInputs')"
    pack_test = ("dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', "
                 "'img_shape', 'scale_factor'))")
    metric = "['bbox', 'segm']" if mask else "'bbox'"
    # fewer proposals and RoI samples than the recipes' 1000-2000 / 512: on 128 x 96 images
    # they are mostly duplicates, and the RoI heads' cost (three 4conv1fc stages in Cascade)
    # would dominate the run; the heads themselves stay as configured
    rpn_test = "rpn=dict(max_per_img=100), " if mask else ''
    test_cfg = (f"dict({rpn_test}rcnn=dict(score_thr=0.0))" if mask
                else "dict(score_thr=0.0)")
    train_cfg = {
        'mask_rcnn': "train_cfg=dict(rpn_proposal=dict(max_per_img=128), "
                     "rcnn=dict(sampler=dict(num=64))),",
        'cascade': "train_cfg=dict(rpn_proposal=dict(max_per_img=128)),  # + CASCADE_OPTS",
        'retinanet': '',
    }[family]
    return f'''
_base_ = {base!r}
data_root = {data_root + '/'!r}
work_dir = {work_dir!r}
metainfo = dict(classes=('circle', 'square', 'triangle'))
model = dict(
    backbone=dict(arch={arch!r}, norm_cfg=dict(type='BN'), init_cfg=None),
    neck=dict(in_channels={list(neck_channels)!r}),
    {heads},
    {train_cfg}
    # untrained models score low: keep every box so the COCO metrics have input
    test_cfg={test_cfg})
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask={with_mask}),
    dict(type='Resize', scale=(128, 96), keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    {pack},
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(128, 96), keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask={with_mask}),
    {pack_test},
]
train_dataloader = dict(
    batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=data_root, metainfo=metainfo, ann_file={ann.format('training')!r},
                 data_prefix=dict(img='images/training/'), pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=data_root, metainfo=metainfo,
                 ann_file={ann.format('validation')!r},
                 data_prefix=dict(img='images/validation/'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + {ann.format('validation')!r}, metric={metric})
test_evaluator = val_evaluator
train_cfg = dict(max_epochs={max_epochs}, val_interval={max_epochs})
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False, begin=0, end=1)]
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork'))
randomness = dict(seed=0, deterministic=False)
{extra}
'''


CASCADE_OPTS = ['--cfg-options'] + [
    f'model.roi_head.bbox_head.{i}.num_classes=3' for i in range(3)] + [
    f'model.train_cfg.rcnn.{i}.sampler.num=64' for i in range(3)]
