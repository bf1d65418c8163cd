# Mask R-CNN + FPN, EVT-T, 3x schedule (36 epochs, steps 27 and 33) with multi-scale
# training: short side 480..800 (step 32), long side <= 1333.
_base_ = './mask-rcnn_evt-t_fpn_1x_coco.py'

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomChoiceResize',
         scales=[(1333, s) for s in range(480, 801, 32)],
         keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[27, 33],
         gamma=0.1),
]
