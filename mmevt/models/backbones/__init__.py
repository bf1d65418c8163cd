from .evt import EVT, arch_zoo, resolve_arch

__all__ = ['EVT', 'arch_zoo', 'resolve_arch']
