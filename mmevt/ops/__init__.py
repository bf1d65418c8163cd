"""Functional ops: spatial decay, token grouping (1D groups, 2D windows), decay attention."""
from .attention import (ATTN_IMPLS, attention_reference, attention_sdpa,
                        decomposed_decay_attention, flex_available, resolve_impl,
                        spatial_decay_attention)
from .decay import (DECAY_KINDS, GROUP_MODES, WINDOW_MODES, DecayBiasCache, decay_bias,
                    decay_log_rates, grid_coords, group_token_index, grouped_distance,
                    num_groups, pairwise_distance, window_side)
from .grouping import group_tokens, ungroup_tokens
from .rotary import apply_rotary, rotary_sin_cos

__all__ = [
    'ATTN_IMPLS', 'DECAY_KINDS', 'GROUP_MODES', 'WINDOW_MODES', 'DecayBiasCache', 'apply_rotary',
    'attention_reference', 'attention_sdpa', 'decay_bias', 'decay_log_rates',
    'decomposed_decay_attention', 'flex_available', 'grid_coords', 'group_token_index',
    'group_tokens', 'grouped_distance', 'num_groups', 'pairwise_distance', 'resolve_impl',
    'rotary_sin_cos', 'spatial_decay_attention', 'ungroup_tokens', 'window_side'
]
