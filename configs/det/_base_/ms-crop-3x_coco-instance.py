# The 3x "ms-crop" recipe shared by every 3x Mask R-CNN / Cascade Mask R-CNN config here,
# written once. Its variables have unique names (mmengine refuses a key defined in two
# `_base_` files), and the 3x configs use them as `_base_.ms_crop_train_pipeline` etc.
#
# Source: Swin's detection recipe, used as is by the RMT authors (qhfan/RMT
# detect/configs/RMT/maskrcnn_{s,m,l}_3x.py, casrcnn_{s,m}_3x.py) and by mmdet
# (configs/swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py): flip 0.5, then a random
# choice between
#   (a) multi-scale resize: short side 480..800 in steps of 32, long side <= 1333;
#   (b) resize to short side 400 / 500 / 600, absolute-range random crop of 384..600
#       (height and width each drawn in [384, 600]), then (a)'s multi-scale resize.
# 36 epochs, lr x0.1 after epochs 27 and 33 (their configs' `step=[27, 33]`).
ms_crop_scales = [(1333, short) for short in range(480, 801, 32)]  # (w, h): 480..800
ms_crop_train_pipeline = [
    dict(_scope_='mmdet', type='LoadImageFromFile'),
    dict(_scope_='mmdet', type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(_scope_='mmdet', type='RandomFlip', prob=0.5),
    dict(_scope_='mmdet', type='RandomChoice',
         transforms=[
             [dict(type='RandomChoiceResize', scales=ms_crop_scales, keep_ratio=True)],
             [dict(type='RandomChoiceResize',
                   scales=[(1333, 400), (1333, 500), (1333, 600)], keep_ratio=True),
              dict(type='RandomCrop', crop_type='absolute_range', crop_size=(384, 600),
                   allow_negative_crop=True),
              dict(type='RandomChoiceResize', scales=ms_crop_scales, keep_ratio=True)],
         ]),
    dict(_scope_='mmdet', type='PackDetInputs'),
]
ms_crop_max_epochs = 36
ms_crop_milestones = [27, 33]
ms_crop_steps = dict(_scope_='mmdet', type='MultiStepLR', begin=0, end=ms_crop_max_epochs,
              by_epoch=True, milestones=ms_crop_milestones, gamma=0.1)
# warm-up: 500 iterations from 0.001 x lr (the RMT authors' 3x configs) or 1000 (mmdet's
# configs/swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py, for EVT-Swin)
ms_crop_param_scheduler = [
    dict(_scope_='mmdet', type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=500), ms_crop_steps]
ms_crop_swin_param_scheduler = [
    dict(_scope_='mmdet', type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=1000), ms_crop_steps]
