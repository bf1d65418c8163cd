from .aerial import DOTA_CLASSES, generate_dota
from .keypoints import KEYPOINT_NAMES, generate_keypoints
from .shapes import CLS_CLASSES, SHAPE_CLASSES, generate_shape_classes, generate_shapes
from .videos import ACTION_CLASSES, generate_rawframes

__all__ = ['ACTION_CLASSES', 'CLS_CLASSES', 'DOTA_CLASSES', 'KEYPOINT_NAMES', 'SHAPE_CLASSES',
           'generate_dota', 'generate_keypoints', 'generate_rawframes', 'generate_shape_classes',
           'generate_shapes']
