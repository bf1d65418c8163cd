from .backbones import EVT, arch_zoo
from .necks import RMTClsNeck

__all__ = ['EVT', 'RMTClsNeck', 'arch_zoo']
