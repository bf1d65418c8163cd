"""The EVT / EVT-Swin / RMT arch table: names, aliases, settings, resolution and checks.

Adding an arch is one :func:`_arch` entry below (plus its config files): the tests, the
complexity and benchmark tools, their docs tables and the converter's arch detection read
:data:`ARCH_NAMES` / :data:`ARCH_FAMILIES` / :data:`ARCH_ALIASES`.
"""
import copy
from typing import Dict, Tuple, Union

from ...ops import DECAY_KINDS, square_side
from ...ops.checks import check_choice, check_positive_int
from ..layers.mixers import MIXERS, mixer_type, needs_square_group, takes_arguments

MIN_INPUT_SIZE = 32  # four stride-2 levels

REQUIRED_KEYS = ('embed_dims', 'depths', 'num_heads')
# Optional arch keys and their defaults; per-stage keys accept a scalar for all stages.
ARCH_DEFAULTS = dict(
    init_values=2.,
    heads_ranges=4.,
    mlp_ratios=4.,
    mixers='full',
    group_sizes=49,  # divides every stage grid at 224 (56^2, 28^2, 14^2): no padding
    layer_scales=0.,
    decay='euclidean',
    use_rope=False,
    drop_path_rate=0.1,
    stem='conv',  # 'conv' (RMT/EVT conv stem) or 'patch' (Swin patch embed + merging)
    cpe=True,
    lepe=True,
    ffn_dwconv=True,
)
PER_STAGE_KEYS = ('embed_dims', 'depths', 'num_heads', 'init_values', 'heads_ranges',
                  'mlp_ratios', 'mixers', 'group_sizes', 'layer_scales')
STEMS = ('conv', 'patch')

arch_zoo: Dict[str, dict] = {}  # canonical name -> settings, each arch once
ARCH_ALIASES: Dict[str, str] = {}  # every accepted name (lower case) -> canonical name
ARCH_FAMILIES: Dict[str, Tuple[str, ...]] = {}  # 'evt', 'evt-swin', 'rmt', 'test' -> names


def _arch(family: str, names: Tuple[str, ...], *bases: dict, **settings) -> None:
    """Add one arch: ``names[0]`` is canonical, the rest aliases; ``settings`` override the
    ``bases`` (merged left to right)."""
    merged = {}
    for base in bases:
        merged.update(base)
    merged.update(settings)
    arch_zoo[names[0]] = merged
    ARCH_ALIASES.update(dict.fromkeys(names, names[0]))
    ARCH_FAMILIES[family] = ARCH_FAMILIES.get(family, ()) + (names[0], )


# shared settings; every number: the RMT authors' public configs (RMT), Swin's (EVT-Swin)
_RMT = dict(decay='manhattan', use_rope=True, init_values=2)
_EVT = dict(decay='euclidean', use_rope=False, init_values=2, group_sizes=49)
_SWIN = dict(decay='euclidean', use_rope=False, init_values=2, heads_ranges=[4, 4, 6, 6],
             mlp_ratios=4, stem='patch', cpe=False, lepe=False, ffn_dwconv=False,
             mixers=['group_dilate'] * 3 + ['full'], group_sizes=49)
# widths (T/S share them, as B/L their layer scale), and the decay ranges of each width
_T_DIMS = dict(embed_dims=[64, 128, 256, 512], num_heads=[4, 4, 8, 16])
_B_DIMS = dict(embed_dims=[80, 160, 320, 512], num_heads=[5, 5, 10, 16],
               layer_scales=[0, 0, 1e-6, 1e-6])
_L_DIMS = dict(embed_dims=[112, 224, 448, 640], num_heads=[7, 7, 14, 20],
               layer_scales=[0, 0, 1e-6, 1e-6])
_T_DECAY = dict(heads_ranges=[4, 4, 6, 6])
_B_DECAY = dict(heads_ranges=[5, 5, 6, 6])
_L_DECAY = dict(heads_ranges=[6, 6, 6, 6])
_SEP = dict(mlp_ratios=[4, 4, 3, 3])  # S/B/L share RMT's per-stage MLP ratios
_GROUPED = dict(mixers=['group_dilate'] * 3 + ['full'])

# EVT: RMT's widths and decay settings, grouped EuSA where RMT decomposes.
_arch('evt', ('evt-t', 'evt-tiny', 't', 'tiny'), _EVT, _T_DIMS, _T_DECAY, _GROUPED,
      depths=[2, 2, 10, 2], mlp_ratios=3, drop_path_rate=0.1)
_arch('evt', ('evt-s', 'evt-small', 's', 'small'), _EVT, _T_DIMS, _T_DECAY, _SEP, _GROUPED,
      depths=[3, 4, 18, 4], drop_path_rate=0.15)
_arch('evt', ('evt-b', 'evt-base', 'b', 'base'), _EVT, _B_DIMS, _B_DECAY, _SEP, _GROUPED,
      depths=[4, 8, 25, 8], drop_path_rate=0.4)
_arch('evt', ('evt-l', 'evt-large', 'l', 'large'), _EVT, _L_DIMS, _L_DECAY, _SEP, _GROUPED,
      depths=[4, 8, 25, 8], drop_path_rate=0.55)
# EVT-Swin: Swin-T/S/B exactly, W-MSA/SW-MSA -> EuSA-g/EuSA-d, last stage full EuSA.
_arch('evt-swin', ('evt-swin-t', 'evt-swin-tiny'), _SWIN, embed_dims=[96, 192, 384, 768],
      depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], drop_path_rate=0.2)
_arch('evt-swin', ('evt-swin-s', 'evt-swin-small'), _SWIN, embed_dims=[96, 192, 384, 768],
      depths=[2, 2, 18, 2], num_heads=[3, 6, 12, 24], drop_path_rate=0.3)
_arch('evt-swin', ('evt-swin-b', 'evt-swin-base'), _SWIN, embed_dims=[128, 256, 512, 1024],
      depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32], drop_path_rate=0.5)
# RMT baselines: the authors' public configurations (decomposed MaSA + rotary shift).
_arch('rmt', ('rmt-t', 'rmt-tiny'), _RMT, _T_DIMS, _T_DECAY, depths=[2, 2, 8, 2],
      mlp_ratios=3, mixers=['decomposed'] * 2 + ['full'] * 2, drop_path_rate=0.1)
_arch('rmt', ('rmt-s', 'rmt-small'), _RMT, _T_DIMS, _T_DECAY, _SEP, depths=[3, 4, 18, 4],
      mixers=['decomposed'] * 3 + ['full'], drop_path_rate=0.15)
_arch('rmt', ('rmt-b', 'rmt-base'), _RMT, _B_DIMS, _B_DECAY, _SEP, depths=[4, 8, 25, 8],
      mixers=['decomposed'] * 3 + ['full'], drop_path_rate=0.4)
_arch('rmt', ('rmt-l', 'rmt-large'), _RMT, _L_DIMS, _L_DECAY, _SEP, depths=[4, 8, 25, 8],
      mixers=['decomposed'] * 3 + ['full'], drop_path_rate=0.5)
# Tiny archs for tests (ours): EVT-style and RMT-style (decomposed + rotary, layer scale).
_TINY = dict(embed_dims=[16, 32, 64, 128], num_heads=[1, 2, 4, 4], heads_ranges=[4, 4, 6, 6],
             mlp_ratios=2, drop_path_rate=0.)
_arch('test', ('evt-test', 'test'), _EVT, _TINY, _GROUPED, depths=[1, 1, 2, 1], group_sizes=16)
_arch('test', ('rmt-test', ), _RMT, _TINY, depths=[1, 2, 2, 1],
      layer_scales=[0, 0, 1e-6, 1e-6], mixers=['decomposed'] * 3 + ['full'])

ARCH_NAMES: Tuple[str, ...] = tuple(arch_zoo)  # canonical names, each arch once
# the authors' RMT layouts, which their checkpoints can hold (the converter's detection)
RMT_ARCHS: Tuple[str, ...] = tuple(n for n in ARCH_NAMES if arch_zoo[n]['mixers'][0]
                                   == 'decomposed' and arch_zoo[n]['use_rope'])


def canonical_name(name: str) -> str:
    """The canonical :data:`arch_zoo` name of an arch name or alias (any case).

    Raises:
        ValueError: the name is not known (the message lists the canonical names).
    """
    key = name.lower()
    if key not in ARCH_ALIASES:
        raise ValueError(f'arch {name!r} is not known; choose one of {list(ARCH_NAMES)} '
                         f'(aliases: {sorted(set(ARCH_ALIASES) - set(ARCH_NAMES))}) or pass '
                         f'a dict with keys {list(REQUIRED_KEYS)}')
    return ARCH_ALIASES[key]


def _per_stage(name: str, value, num_stages: int) -> list:
    """Broadcast a scalar to every stage; check a list has one entry per stage."""
    if isinstance(value, (list, tuple)):
        if len(value) != num_stages:
            raise ValueError(f'{name} needs one value per stage ({num_stages}), '
                             f'got {len(value)}: {list(value)}')
        return list(value)
    return [value] * num_stages


def resolve_arch(arch: Union[str, dict]) -> dict:
    """Look up ``arch`` (a name or alias) in :data:`arch_zoo` or validate a custom arch dict.

    Returns:
        dict: every key of the arch, per-stage keys as lists (a new dict).
    """
    if isinstance(arch, str):
        arch = arch_zoo[canonical_name(arch)]
    elif not isinstance(arch, dict):
        raise ValueError(f'arch must be a name or a dict, got {type(arch).__name__}')
    missing = [k for k in REQUIRED_KEYS if k not in arch]
    if missing:
        raise ValueError(f'custom arch is missing required keys {missing}; '
                         f'required: {list(REQUIRED_KEYS)}')
    unknown = sorted(set(arch) - set(REQUIRED_KEYS) - set(ARCH_DEFAULTS))
    if unknown:
        raise ValueError(f'custom arch has unknown keys {unknown}; allowed: '
                         f'{list(REQUIRED_KEYS) + list(ARCH_DEFAULTS)}')
    out = copy.deepcopy({**ARCH_DEFAULTS, **arch})
    if not isinstance(out['depths'], (list, tuple)) or not out['depths']:
        raise ValueError(f"arch 'depths' must be a non-empty list, got {out['depths']!r}")
    num_stages = len(out['depths'])
    for k in PER_STAGE_KEYS:
        out[k] = _per_stage(k, out[k], num_stages)
    return out


def check_arch(arch: dict) -> None:
    """Check a resolved arch (:func:`resolve_arch`); a ``ValueError`` names the bad value."""
    check_choice('decay', arch['decay'], DECAY_KINDS)
    if arch['stem'] not in STEMS:
        raise ValueError(f"arch 'stem' must be one of {list(STEMS)}, got {arch['stem']!r}")
    for i, (c, h) in enumerate(zip(arch['embed_dims'], arch['num_heads'])):
        if not isinstance(h, int) or h <= 0 or c % h:
            raise ValueError(f'num_heads[{i}]={h!r} must be a positive int dividing '
                             f'embed_dims[{i}]={c}')
    for i, mixer in enumerate(arch['mixers']):
        name = mixer_type(mixer)
        if name not in MIXERS:
            raise ValueError(f'mixers[{i}] must be one of {list(MIXERS)} (or a dict '
                             f"with such a 'type'), got {mixer!r}")
        if isinstance(mixer, dict) and len(mixer) > 1 and not takes_arguments(name):
            with_args = [m for m in MIXERS if takes_arguments(m)]
            raise ValueError(f'mixers[{i}]: only {with_args} take arguments; '
                             f'use group_sizes / decay for {name!r}, got {mixer!r}')
    for i, (g, mixer) in enumerate(zip(arch['group_sizes'], arch['mixers'])):
        check_positive_int(f'group_sizes[{i}]', g)
        if needs_square_group(mixer_type(mixer)) and square_side(g) is None:
            raise ValueError(f'group_sizes[{i}]={g} must be a square (tokens per 2D '
                             f'window, e.g. 49 or 64) for mixers[{i}]={mixer!r}')
    for i, d in enumerate(arch['depths']):
        if not isinstance(d, int) or d < 1:
            raise ValueError(f'depths[{i}] must be a positive int, got {d!r}')
    if not 0 <= arch['drop_path_rate'] < 1:
        raise ValueError(f"drop_path_rate must be in [0, 1), got {arch['drop_path_rate']}")


__all__ = ['ARCH_ALIASES', 'ARCH_DEFAULTS', 'ARCH_FAMILIES', 'ARCH_NAMES', 'MIN_INPUT_SIZE',
           'PER_STAGE_KEYS', 'REQUIRED_KEYS', 'RMT_ARCHS', 'arch_zoo', 'canonical_name',
           'check_arch', 'resolve_arch']
