from .atomic_io import atomic_write, enable_atomic_local_writes
from .checkpoint import SAFE_CHECKPOINT_GLOBALS, enable_safe_checkpoint_loading

__all__ = ['SAFE_CHECKPOINT_GLOBALS', 'atomic_write', 'enable_atomic_local_writes',
           'enable_safe_checkpoint_loading']
