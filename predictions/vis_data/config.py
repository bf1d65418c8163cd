auto_scale_lr = dict(base_batch_size=16, enable=False)
crop_size = (
    128,
    128,
)
custom_imports = dict(
    allow_failed_imports=False, imports=[
        'mmevt',
    ])
data_preprocessor = dict(
    _scope_='mmseg',
    bgr_to_rgb=True,
    mean=[
        123.675,
        116.28,
        103.53,
    ],
    pad_val=0,
    seg_pad_val=255,
    std=[
        58.395,
        57.12,
        57.375,
    ],
    type='SegDataPreProcessor')
data_root = 'data/demo/'
dataset = dict(
    data_root='data/demo/',
    img_suffix='.jpg',
    metainfo=dict(
        classes=(
            'background',
            'circle',
            'square',
            'triangle',
        ),
        palette=[
            [
                120,
                120,
                120,
            ],
            [
                220,
                20,
                60,
            ],
            [
                0,
                128,
                255,
            ],
            [
                255,
                200,
                0,
            ],
        ]),
    reduce_zero_label=True,
    seg_map_suffix='.png',
    type='BaseSegDataset')
dataset_type = 'ADE20KDataset'
default_hooks = dict(
    checkpoint=dict(
        _scope_='mmseg', by_epoch=False, interval=1200, type='CheckpointHook'),
    logger=dict(
        _scope_='mmseg',
        interval=20,
        log_metric_by_epoch=False,
        type='LoggerHook'),
    param_scheduler=dict(_scope_='mmseg', type='ParamSchedulerHook'),
    sampler_seed=dict(_scope_='mmseg', type='DistSamplerSeedHook'),
    timer=dict(_scope_='mmseg', type='IterTimerHook'),
    visualization=dict(
        _scope_='mmseg', draw=True, type='SegVisualizationHook'))
default_scope = 'mmseg'
env_cfg = dict(
    cudnn_benchmark=True,
    dist_cfg=dict(backend='nccl'),
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0))
img_ratios = [
    0.5,
    0.75,
    1.0,
    1.25,
    1.5,
    1.75,
]
launcher = 'none'
load_from = '/work/main/work_dirs/demo/20261130_010631/sem_fpn/iter_1200.pth'
log_level = 'INFO'
log_processor = dict(by_epoch=False)
max_iters = 1200
metainfo = dict(
    classes=(
        'background',
        'circle',
        'square',
        'triangle',
    ),
    palette=[
        [
            120,
            120,
            120,
        ],
        [
            220,
            20,
            60,
        ],
        [
            0,
            128,
            255,
        ],
        [
            255,
            200,
            0,
        ],
    ])
model = dict(
    _scope_='mmseg',
    backbone=dict(
        arch=dict(
            depths=[
                1,
                1,
                2,
                1,
            ],
            embed_dims=[
                32,
                64,
                128,
                256,
            ],
            group_sizes=64,
            heads_ranges=[
                4,
                4,
                6,
                6,
            ],
            mixers=[
                'group_dilate',
                'group_dilate',
                'full',
                'full',
            ],
            mlp_ratios=2,
            num_heads=[
                2,
                2,
                4,
                8,
            ]),
        drop_path_rate=0.0,
        init_cfg=None,
        norm_cfg=dict(requires_grad=True, type='BN'),
        out_indices=(
            0,
            1,
            2,
            3,
        ),
        type='EVT'),
    data_preprocessor=dict(
        bgr_to_rgb=True,
        mean=[
            123.675,
            116.28,
            103.53,
        ],
        pad_val=0,
        seg_pad_val=255,
        size=(
            128,
            128,
        ),
        std=[
            58.395,
            57.12,
            57.375,
        ],
        type='SegDataPreProcessor'),
    decode_head=dict(
        align_corners=False,
        channels=64,
        dropout_ratio=0.1,
        feature_strides=[
            4,
            8,
            16,
            32,
        ],
        in_channels=[
            64,
            64,
            64,
            64,
        ],
        in_index=[
            0,
            1,
            2,
            3,
        ],
        loss_decode=dict(
            loss_weight=1.0, type='CrossEntropyLoss', use_sigmoid=False),
        norm_cfg=dict(requires_grad=True, type='BN'),
        num_classes=4,
        type='FPNHead'),
    neck=dict(
        in_channels=[
            32,
            64,
            128,
            256,
        ],
        num_outs=4,
        out_channels=64,
        type='FPN'),
    pretrained=None,
    test_cfg=dict(mode='whole'),
    train_cfg=dict(),
    type='EncoderDecoder')
norm_cfg = dict(_scope_='mmseg', requires_grad=True, type='SyncBN')
optim_wrapper = dict(
    clip_grad=None,
    optimizer=dict(
        betas=(
            0.9,
            0.999,
        ), lr=0.001, type='AdamW', weight_decay=0.0001),
    paramwise_cfg=dict(norm_decay_mult=0.0),
    type='OptimWrapper')
optimizer = dict(
    _scope_='mmseg', lr=0.01, momentum=0.9, type='SGD', weight_decay=0.0005)
param_scheduler = [
    dict(begin=0, by_epoch=False, end=50, start_factor=0.01, type='LinearLR'),
    dict(
        begin=50,
        by_epoch=False,
        end=1200,
        eta_min=0.0,
        power=0.9,
        type='PolyLR'),
]
pretrained = 'checkpoints/evt-t_in1k.pth'
resume = False
test_cfg = dict(_scope_='mmseg', type='TestLoop')
test_dataloader = dict(
    batch_size=8,
    dataset=dict(
        _scope_='mmseg',
        data_prefix=dict(
            img_path='images/validation',
            seg_map_path='annotations/validation'),
        data_root='/work/main/data/demo/',
        img_suffix='.jpg',
        metainfo=dict(
            classes=(
                'background',
                'circle',
                'square',
                'triangle',
            ),
            palette=[
                [
                    120,
                    120,
                    120,
                ],
                [
                    220,
                    20,
                    60,
                ],
                [
                    0,
                    128,
                    255,
                ],
                [
                    255,
                    200,
                    0,
                ],
            ]),
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(keep_ratio=True, scale=(
                128,
                128,
            ), type='Resize'),
            dict(reduce_zero_label=True, type='LoadAnnotations'),
            dict(type='PackSegInputs'),
        ],
        reduce_zero_label=True,
        seg_map_suffix='.png',
        type='BaseSegDataset'),
    num_workers=1,
    persistent_workers=True,
    sampler=dict(_scope_='mmseg', shuffle=False, type='DefaultSampler'))
test_evaluator = dict(
    _scope_='mmseg', iou_metrics=[
        'mIoU',
    ], type='IoUMetric')
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(keep_ratio=True, scale=(
        128,
        128,
    ), type='Resize'),
    dict(reduce_zero_label=True, type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_cfg = dict(
    _scope_='mmseg',
    max_iters=1200,
    type='IterBasedTrainLoop',
    val_interval=1200)
train_dataloader = dict(
    batch_size=8,
    dataset=dict(
        _scope_='mmseg',
        data_prefix=dict(
            img_path='images/training', seg_map_path='annotations/training'),
        data_root='/work/main/data/demo/',
        img_suffix='.jpg',
        metainfo=dict(
            classes=(
                'background',
                'circle',
                'square',
                'triangle',
            ),
            palette=[
                [
                    120,
                    120,
                    120,
                ],
                [
                    220,
                    20,
                    60,
                ],
                [
                    0,
                    128,
                    255,
                ],
                [
                    255,
                    200,
                    0,
                ],
            ]),
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(reduce_zero_label=True, type='LoadAnnotations'),
            dict(
                keep_ratio=True,
                ratio_range=(
                    0.75,
                    1.5,
                ),
                scale=(
                    128,
                    128,
                ),
                type='RandomResize'),
            dict(
                cat_max_ratio=0.95, crop_size=(
                    128,
                    128,
                ), type='RandomCrop'),
            dict(prob=0.5, type='RandomFlip'),
            dict(type='PackSegInputs'),
        ],
        reduce_zero_label=True,
        seg_map_suffix='.png',
        type='BaseSegDataset'),
    num_workers=1,
    persistent_workers=True,
    sampler=dict(_scope_='mmseg', shuffle=True, type='InfiniteSampler'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(reduce_zero_label=True, type='LoadAnnotations'),
    dict(
        keep_ratio=True,
        ratio_range=(
            0.75,
            1.5,
        ),
        scale=(
            128,
            128,
        ),
        type='RandomResize'),
    dict(cat_max_ratio=0.95, crop_size=(
        128,
        128,
    ), type='RandomCrop'),
    dict(prob=0.5, type='RandomFlip'),
    dict(type='PackSegInputs'),
]
tta_model = dict(_scope_='mmseg', type='SegTTAModel')
tta_pipeline = [
    dict(_scope_='mmseg', backend_args=None, type='LoadImageFromFile'),
    dict(
        _scope_='mmseg',
        transforms=[
            [
                dict(keep_ratio=True, scale_factor=0.5, type='Resize'),
                dict(keep_ratio=True, scale_factor=0.75, type='Resize'),
                dict(keep_ratio=True, scale_factor=1.0, type='Resize'),
                dict(keep_ratio=True, scale_factor=1.25, type='Resize'),
                dict(keep_ratio=True, scale_factor=1.5, type='Resize'),
                dict(keep_ratio=True, scale_factor=1.75, type='Resize'),
            ],
            [
                dict(direction='horizontal', prob=0.0, type='RandomFlip'),
                dict(direction='horizontal', prob=1.0, type='RandomFlip'),
            ],
            [
                dict(type='LoadAnnotations'),
            ],
            [
                dict(type='PackSegInputs'),
            ],
        ],
        type='TestTimeAug'),
]
val_cfg = dict(_scope_='mmseg', type='ValLoop')
val_dataloader = dict(
    batch_size=8,
    dataset=dict(
        _scope_='mmseg',
        data_prefix=dict(
            img_path='images/validation',
            seg_map_path='annotations/validation'),
        data_root='/work/main/data/demo/',
        img_suffix='.jpg',
        metainfo=dict(
            classes=(
                'background',
                'circle',
                'square',
                'triangle',
            ),
            palette=[
                [
                    120,
                    120,
                    120,
                ],
                [
                    220,
                    20,
                    60,
                ],
                [
                    0,
                    128,
                    255,
                ],
                [
                    255,
                    200,
                    0,
                ],
            ]),
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(keep_ratio=True, scale=(
                128,
                128,
            ), type='Resize'),
            dict(reduce_zero_label=True, type='LoadAnnotations'),
            dict(type='PackSegInputs'),
        ],
        reduce_zero_label=True,
        seg_map_suffix='.png',
        type='BaseSegDataset'),
    num_workers=1,
    persistent_workers=True,
    sampler=dict(_scope_='mmseg', shuffle=False, type='DefaultSampler'))
val_evaluator = dict(
    _scope_='mmseg', iou_metrics=[
        'mIoU',
    ], type='IoUMetric')
vis_backends = [
    dict(_scope_='mmseg', type='LocalVisBackend'),
]
visualizer = dict(
    _scope_='mmseg',
    name='visualizer',
    save_dir='predictions',
    type='SegLocalVisualizer',
    vis_backends=[
        dict(type='LocalVisBackend'),
    ])
work_dir = '/work/main/work_dirs/demo/20261130_010631/sem_fpn_test'
