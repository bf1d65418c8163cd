from .attention_maps import attention_rollout, dense_attention, visible_mask
from .complexity import (GIBI, GIGA, MEGA, count_macs, count_params, macs_breakdown,
                         model_complexity)
from .flops import analyze_flops, config_complexity, count_flops
from .memory import saved_bytes_split, saved_tensor_bytes

__all__ = ['GIBI', 'GIGA', 'MEGA', 'analyze_flops', 'attention_rollout', 'config_complexity',
           'count_flops', 'count_macs', 'count_params', 'dense_attention', 'macs_breakdown',
           'model_complexity', 'saved_bytes_split',
           'saved_tensor_bytes', 'visible_mask']
