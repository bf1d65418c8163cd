from .rmt_token_label_head import RMTTokenLabelClsHead

__all__ = ['RMTTokenLabelClsHead']
