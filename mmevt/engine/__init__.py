"""Training-loop pieces: the layer-wise lr decay optimizer-wrapper constructor."""
from .optimizers import EVTLayerDecayOptimWrapperConstructor

__all__ = ['EVTLayerDecayOptimWrapperConstructor']
