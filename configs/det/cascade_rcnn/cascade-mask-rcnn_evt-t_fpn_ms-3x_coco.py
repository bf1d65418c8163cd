# Cascade Mask R-CNN + FPN, EVT-T, 3x schedule with multi-scale training.
_base_ = [
    'mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
    '../mask_rcnn/mask-rcnn_evt-t_fpn_ms-3x_coco.py',
]
