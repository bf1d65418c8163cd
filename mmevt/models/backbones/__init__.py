from .archs import ARCH_ALIASES, ARCH_FAMILIES, ARCH_NAMES, arch_zoo, resolve_arch
from .evt import EVT

__all__ = ['ARCH_ALIASES', 'ARCH_FAMILIES', 'ARCH_NAMES', 'EVT', 'arch_zoo', 'resolve_arch']
