"""Functional ops, by concern: ``decay`` (rates, distances, bias), ``grouping`` (layouts,
group / ungroup, padding), ``cache`` (the per-grid cache), ``checks`` (argument checks, the
input-check switch), ``attention`` (reference and fast paths, path choice), ``decomposed``
(RMT's row / column attention), ``recompute`` (training ops that save less),
``depthwise`` (depth-wise convs with their residual folded and a fast weight gradient),
``rotary``."""
from .attention import (ATTN_IMPLS, ATTN_PATHS, AttnPath, attention_probs,
                        attention_reference, attention_sdpa, choose_impl, flex_available,
                        impl_unavailable, resolve_impl, spatial_decay_attention,
                        spatial_decay_probs)
from .cache import DecayBiasCache, ForwardTables, GridCache
from .checks import input_checks_enabled, set_input_checks
from .decomposed import decomposed_decay_attention, decomposed_decay_probs
from .decay import (DECAY_KINDS, decay_bias, decay_log_rates, grid_coords, grouped_distance,
                    line_decay_bias, pairwise_distance)
from .grouping import (GROUP_MODES, LAYOUTS, WINDOW_MODES, Layout, group_token_index,
                       group_tokens, has_padding, num_groups, square_side, ungroup_pairs,
                       ungroup_tokens, window_side)
from .rotary import apply_rotary, rotary_sin_cos

__all__ = [
    'ATTN_IMPLS', 'ATTN_PATHS', 'AttnPath', 'DECAY_KINDS', 'GROUP_MODES', 'LAYOUTS', 'Layout',
    'WINDOW_MODES', 'DecayBiasCache', 'ForwardTables', 'GridCache',
    'apply_rotary', 'attention_probs', 'attention_reference', 'attention_sdpa', 'choose_impl',
    'decay_bias', 'decay_log_rates', 'decomposed_decay_attention', 'decomposed_decay_probs',
    'flex_available', 'grid_coords', 'group_token_index', 'group_tokens', 'grouped_distance',
    'has_padding', 'impl_unavailable', 'input_checks_enabled', 'line_decay_bias', 'num_groups',
    'pairwise_distance', 'resolve_impl', 'rotary_sin_cos', 'set_input_checks',
    'spatial_decay_attention', 'spatial_decay_probs', 'square_side', 'ungroup_pairs',
    'ungroup_tokens', 'window_side'
]
