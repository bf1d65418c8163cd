from .shapes import SHAPE_CLASSES, generate_shapes

__all__ = ['SHAPE_CLASSES', 'generate_shapes']
