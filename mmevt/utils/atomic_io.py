"""Alias of :mod:`mmevt.patches.atomic_writes` (its home since mmevt's patches moved to
:mod:`mmevt.patches`; kept for one release)."""
from ..patches.atomic_writes import atomic_write, enable_atomic_local_writes

__all__ = ['atomic_write', 'enable_atomic_local_writes']
