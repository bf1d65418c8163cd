from .backbones import EVT, arch_zoo
from .heads import RMTTokenLabelClsHead
from .necks import RMTClsNeck

__all__ = ['EVT', 'RMTClsNeck', 'RMTTokenLabelClsHead', 'arch_zoo']
