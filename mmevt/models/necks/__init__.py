from .rmt_cls_neck import RMTClsNeck

__all__ = ['RMTClsNeck']
