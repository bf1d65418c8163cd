"""Alias of :mod:`mmevt.patches.cpu_distributed` (kept for one release)."""
from ..patches.cpu_distributed import enable_cpu_distributed

__all__ = ['enable_cpu_distributed']
