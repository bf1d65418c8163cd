"""Training-loop pieces: the layer-wise lr decay optimizer-wrapper constructor."""
from .optimizers import LayerDecayOptimWrapperConstructor

__all__ = ['LayerDecayOptimWrapperConstructor']
