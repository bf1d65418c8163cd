"""The one table of stage token mixers, and the builder the backbone uses.

A stage's ``mixer`` is either a cycle of :class:`SpatialDecayAttention` modes, taken block by
block, or another token-mixer module that may take its own arguments as a dict, e.g.
``dict(type='routing', n_win=7, topk=4)``. Every token layout of the ops
(:data:`mmevt.ops.LAYOUTS`) is a mixer of its own name; the cycles below alternate layouts
(``group_dilate``: g, d, g, d, ... like Swin's W-MSA / SW-MSA; ``window_grid`` is its 2D
counterpart, for ablations).
"""
import inspect
from typing import Dict, List, Tuple, Type, Union

from torch import nn

from ...ops import LAYOUTS
from .attention import ATTN_MODES, SpatialDecayAttention
from .external import ExternalAttention
from .routing import BiLevelRoutingAttention

MIXERS: Dict[str, Union[Tuple[str, ...], Type[nn.Module]]] = {
    **{name: (name, ) for name, lay in LAYOUTS.items() if lay.mixer},
    'group_dilate': ('group', 'dilate'),
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


def mixer_class(name: str) -> Type[nn.Module]:
    """The module class mixer ``name`` builds."""
    entry = MIXERS[name]
    return entry if isinstance(entry, type) else SpatialDecayAttention


def needs_square_group(name: str) -> bool:
    """Whether mixer ``name`` uses 2D windows (its group size must be a square)."""
    modes = MIXERS.get(name)
    return not takes_arguments(name) and any(LAYOUTS[m].grid for m in modes if m in LAYOUTS)


def keyword_arguments(cls: type) -> List[str]:
    """The keyword arguments of ``cls.__init__`` (a module's options), without deprecated
    names (listed in the class attribute ``deprecated_arguments``)."""
    params = inspect.signature(cls.__init__).parameters
    old = getattr(cls, 'deprecated_arguments', ())
    return [n for n, p in params.items() if n != 'self' and n not in old
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def build_mixer(mixer: Union[str, dict], index: int, embed_dims: int, num_heads: int,
                **kwargs) -> nn.Module:
    """The token mixer of the ``index``-th block of a stage.

    Args:
        mixer (str | dict): a name in :data:`MIXERS`, or a dict with ``type`` and the
            module's own arguments (``external`` / ``routing`` only).
        index (int): the block's index in its stage (picks the mode of a cycle).
        embed_dims (int): channels C.
        num_heads (int): heads.
        **kwargs: further arguments of the module (:class:`SpatialDecayAttention` besides
            ``mode``, or those of ``external`` / ``routing``); one the module does not
            take is an error, never dropped.

    Returns:
        nn.Module: ``(B, H, W, C) -> (B, H, W, C)``.

    Raises:
        ValueError: an argument the module does not take.
    """
    name = mixer_type(mixer)
    entry, cls = MIXERS[name], mixer_class(name)
    if takes_arguments(name):
        own = dict(mixer) if isinstance(mixer, dict) else {}
        own.pop('type', None)
        twice = sorted(set(own) & set(kwargs))
        if twice:
            raise ValueError(f'mixer {name!r}: {twice} given both in the mixer dict {mixer!r} '
                             'and as options (layer_cfgs); give each once')
        kwargs = {**own, **kwargs}
    else:
        kwargs = dict(kwargs, mode=entry[index % len(entry)])
    allowed = keyword_arguments(cls)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(f'mixer {name!r} ({cls.__name__}) takes no {unknown}; it takes '
                         f'{allowed}')
    return cls(embed_dims, num_heads, **kwargs)
