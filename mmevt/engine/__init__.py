"""Training-loop pieces: the layer-wise lr decay optimizer-wrapper constructor and the hook
that saves a signalled (preempted) run and resumes it exactly."""
from .optimizers import EVTLayerDecayOptimWrapperConstructor
from .preemption import PREEMPTED_EXIT_CODE, PreemptionCheckpointHook

__all__ = ['EVTLayerDecayOptimWrapperConstructor', 'PREEMPTED_EXIT_CODE',
           'PreemptionCheckpointHook']
