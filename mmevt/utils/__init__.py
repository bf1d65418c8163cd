from .checkpoint import SAFE_CHECKPOINT_GLOBALS, enable_safe_checkpoint_loading

__all__ = ['SAFE_CHECKPOINT_GLOBALS', 'enable_safe_checkpoint_loading']
