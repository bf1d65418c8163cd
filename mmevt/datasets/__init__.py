from .keypoints import KEYPOINT_NAMES, generate_keypoints
from .shapes import CLS_CLASSES, SHAPE_CLASSES, generate_shape_classes, generate_shapes

__all__ = ['CLS_CLASSES', 'KEYPOINT_NAMES', 'SHAPE_CLASSES', 'generate_keypoints',
           'generate_shape_classes', 'generate_shapes']
