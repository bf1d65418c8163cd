from .shapes import CLS_CLASSES, SHAPE_CLASSES, generate_shape_classes, generate_shapes

__all__ = ['CLS_CLASSES', 'SHAPE_CLASSES', 'generate_shape_classes', 'generate_shapes']
