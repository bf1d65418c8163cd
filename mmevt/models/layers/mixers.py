"""The one table of stage token mixers, and the builder the backbone uses.

A stage's ``mixer`` is either a cycle of :class:`SpatialDecayAttention` modes, taken block by
block (``group_dilate`` alternates g, d, g, d, ... like Swin's W-MSA / SW-MSA; ``window_grid``
is its 2D counterpart, for ablations), or another token-mixer module that may take its own
arguments as a dict, e.g. ``dict(type='routing', n_win=7, topk=4)``.
"""
from typing import Dict, Tuple, Type, Union

from torch import nn

from ...ops import WINDOW_MODES
from .attention import ATTN_MODES, SpatialDecayAttention
from .external import ExternalAttention
from .routing import BiLevelRoutingAttention

MIXERS: Dict[str, Union[Tuple[str, ...], Type[nn.Module]]] = {
    'full': ('full', ),
    'group': ('group', ),
    'dilate': ('dilate', ),
    'group_dilate': ('group', 'dilate'),
    'window': ('window', ),
    'grid': ('grid', ),
    'window_grid': ('window', 'grid'),
    'decomposed': ('decomposed', ),
    'external': ExternalAttention,
    'routing': BiLevelRoutingAttention,
}
assert all(isinstance(v, type) or set(v) <= set(ATTN_MODES) for v in MIXERS.values())


def mixer_type(mixer: Union[str, dict]) -> str:
    """The table name of a mixer given as a name or as ``dict(type=name, ...)``."""
    return mixer.get('type') if isinstance(mixer, dict) else mixer


def takes_arguments(name: str) -> bool:
    """Whether mixer ``name`` is a module of its own (given as a dict with its arguments)."""
    return isinstance(MIXERS.get(name), type)


def needs_square_group(name: str) -> bool:
    """Whether mixer ``name`` uses 2D windows (its group size must be a square)."""
    modes = MIXERS.get(name)
    return not takes_arguments(name) and any(m in WINDOW_MODES for m in modes)


def build_mixer(mixer: Union[str, dict], index: int, embed_dims: int, num_heads: int,
                **attn_kwargs) -> nn.Module:
    """The token mixer of the ``index``-th block of a stage.

    Args:
        mixer (str | dict): a name in :data:`MIXERS`, or a dict with ``type`` and the
            module's own arguments (``external`` / ``routing`` only).
        index (int): the block's index in its stage (picks the mode of a cycle).
        embed_dims (int): channels C.
        num_heads (int): heads.
        **attn_kwargs: arguments of :class:`SpatialDecayAttention` besides ``mode``
            (ignored by the other modules).

    Returns:
        nn.Module: ``(B, H, W, C) -> (B, H, W, C)``.
    """
    name = mixer_type(mixer)
    entry = MIXERS[name]
    if takes_arguments(name):
        kwargs = dict(mixer) if isinstance(mixer, dict) else {}
        kwargs.pop('type', None)
        return entry(embed_dims, num_heads, **kwargs)
    return SpatialDecayAttention(embed_dims, num_heads, mode=entry[index % len(entry)],
                                 **attn_kwargs)
