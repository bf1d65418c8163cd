from .attention_maps import attention_rollout, dense_attention, visible_mask
from .complexity import count_macs, count_params, macs_breakdown, model_complexity

__all__ = ['attention_rollout', 'count_macs', 'count_params', 'dense_attention',
           'macs_breakdown', 'model_complexity', 'visible_mask']
