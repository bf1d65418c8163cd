"""EVT backbone family (EVT, EVT-Swin and the RMT baseline) for OpenMMLab 2.x.

This module imports only torch, mmengine and mmevt's own ops/layers, so it runs on
machines without mmcv's compiled ops or any OpenMMLab toolkit.
"""
import copy
import logging
import os.path as osp
import zipfile
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.utils.checkpoint as cp
from mmengine.model import BaseModule
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from ...ops import ATTN_IMPLS, DECAY_KINDS, GridCache, input_checks_enabled, square_side
from ...ops.checks import check_choice, check_positive_int, renamed_argument
from ...utils.checkpoint import unwrap_state_dict
from ..layers import (MIXERS, ConvDownsample, ConvStem, EVTBlock, PatchEmbed, PatchMerging,
                      SpatialDecayAttention, build_mixer, build_norm)
from ..layers.mixers import mixer_type, needs_square_group, takes_arguments

MIN_INPUT_SIZE = 32
_LOG = logging.getLogger('mmevt')  # the ops' logger: dynamo reorders its calls

_REQUIRED_KEYS = ('embed_dims', 'depths', 'num_heads')
# Optional arch keys and their defaults; per-stage keys accept a scalar for all stages.
_ARCH_DEFAULTS = dict(
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
_PER_STAGE_KEYS = ('embed_dims', 'depths', 'num_heads', 'init_values', 'heads_ranges',
                   'mlp_ratios', 'mixers', 'group_sizes', 'layer_scales')


_RMT = dict(decay='manhattan', use_rope=True, init_values=2)
_EVT = dict(decay='euclidean', use_rope=False, init_values=2, group_sizes=49)
_SWIN = dict(decay='euclidean', use_rope=False, init_values=2, heads_ranges=[4, 4, 6, 6],
             mlp_ratios=4, stem='patch', cpe=False, lepe=False, ffn_dwconv=False,
             mixers=['group_dilate'] * 3 + ['full'], group_sizes=49)
_T_DIMS = dict(embed_dims=[64, 128, 256, 512], num_heads=[4, 4, 8, 16], heads_ranges=[4, 4, 6, 6])
_B_DIMS = dict(embed_dims=[80, 160, 320, 512], num_heads=[5, 5, 10, 16], heads_ranges=[5, 5, 6, 6],
               layer_scales=[0, 0, 1e-6, 1e-6])
_L_DIMS = dict(embed_dims=[112, 224, 448, 640], num_heads=[7, 7, 14, 20],
               heads_ranges=[6, 6, 6, 6], layer_scales=[0, 0, 1e-6, 1e-6])


def _aliases(names: Tuple[str, ...], base: dict, **arch) -> Dict[str, dict]:
    """One arch under several names; ``arch`` overrides ``base``."""
    return dict.fromkeys(names, {**base, **arch})


_SEP = dict(mlp_ratios=[4, 4, 3, 3])  # S/B/L share RMT's per-stage MLP ratios
arch_zoo: Dict[str, dict] = {
    # RMT baselines: the authors' public configurations (decomposed MaSA + rotary shift).
    **_aliases(('rmt-t', 'rmt-tiny'), _RMT, **_T_DIMS, depths=[2, 2, 8, 2], mlp_ratios=3,
               mixers=['decomposed'] * 2 + ['full'] * 2, drop_path_rate=0.1),
    **_aliases(('rmt-s', 'rmt-small'), _RMT, **_T_DIMS, **_SEP, depths=[3, 4, 18, 4],
               mixers=['decomposed'] * 3 + ['full'], drop_path_rate=0.15),
    **_aliases(('rmt-b', 'rmt-base'), _RMT, **_B_DIMS, **_SEP, depths=[4, 8, 25, 8],
               mixers=['decomposed'] * 3 + ['full'], drop_path_rate=0.4),
    **_aliases(('rmt-l', 'rmt-large'), _RMT, **_L_DIMS, **_SEP, depths=[4, 8, 25, 8],
               mixers=['decomposed'] * 3 + ['full'], drop_path_rate=0.5),
    # EVT: RMT's widths and decay settings, grouped EuSA where RMT decomposes.
    **_aliases(('evt-t', 'evt-tiny', 't', 'tiny'), _EVT, **_T_DIMS, depths=[2, 2, 10, 2],
               mlp_ratios=3, mixers=['group_dilate'] * 3 + ['full'], drop_path_rate=0.1),
    **_aliases(('evt-s', 'evt-small', 's', 'small'), _EVT, **_T_DIMS, **_SEP,
               depths=[3, 4, 18, 4], mixers=['group_dilate'] * 3 + ['full'],
               drop_path_rate=0.15),
    **_aliases(('evt-b', 'evt-base', 'b', 'base'), _EVT, **_B_DIMS, **_SEP,
               depths=[4, 8, 25, 8], mixers=['group_dilate'] * 3 + ['full'],
               drop_path_rate=0.4),
    **_aliases(('evt-l', 'evt-large', 'l', 'large'), _EVT, **_L_DIMS, **_SEP,
               depths=[4, 8, 25, 8], mixers=['group_dilate'] * 3 + ['full'],
               drop_path_rate=0.55),
    # EVT-Swin: Swin-T/S/B exactly, W-MSA/SW-MSA -> EuSA-g/EuSA-d, last stage full EuSA.
    **_aliases(('evt-swin-t', 'evt-swin-tiny'), _SWIN, embed_dims=[96, 192, 384, 768],
               depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], drop_path_rate=0.2),
    **_aliases(('evt-swin-s', 'evt-swin-small'), _SWIN, embed_dims=[96, 192, 384, 768],
               depths=[2, 2, 18, 2], num_heads=[3, 6, 12, 24], drop_path_rate=0.3),
    **_aliases(('evt-swin-b', 'evt-swin-base'), _SWIN, embed_dims=[128, 256, 512, 1024],
               depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32], drop_path_rate=0.5),
    # Tiny archs for tests: EVT-style and RMT-style (decomposed + rotary, layer scale).
    **_aliases(('evt-test', 'test'), _EVT, embed_dims=[16, 32, 64, 128], depths=[1, 1, 2, 1],
               num_heads=[1, 2, 4, 4], heads_ranges=[4, 4, 6, 6], mlp_ratios=2,
               mixers=['group_dilate'] * 3 + ['full'], group_sizes=16, drop_path_rate=0.),
    **_aliases(('rmt-test', ), _RMT, embed_dims=[16, 32, 64, 128], depths=[1, 2, 2, 1],
               num_heads=[1, 2, 4, 4], heads_ranges=[4, 4, 6, 6], mlp_ratios=2,
               layer_scales=[0, 0, 1e-6, 1e-6], mixers=['decomposed'] * 3 + ['full'],
               drop_path_rate=0.),
}


def _per_stage(name: str, value, num_stages: int) -> list:
    """Broadcast a scalar to every stage; check a list has one entry per stage."""
    if isinstance(value, (list, tuple)):
        if len(value) != num_stages:
            raise ValueError(f'{name} needs one value per stage ({num_stages}), '
                             f'got {len(value)}: {list(value)}')
        return list(value)
    return [value] * num_stages


def resolve_arch(arch: Union[str, dict]) -> dict:
    """Look up ``arch`` in :data:`arch_zoo` or validate a custom arch dict.

    Returns:
        dict: every key of the arch, per-stage keys as lists.
    """
    if isinstance(arch, str):
        key = arch.lower()
        if key not in arch_zoo:
            raise ValueError(f'arch {arch!r} is not known; choose one of '
                             f'{sorted(arch_zoo)} or pass a dict with keys '
                             f'{list(_REQUIRED_KEYS)}')
        arch = arch_zoo[key]
    elif not isinstance(arch, dict):
        raise ValueError(f'arch must be a name or a dict, got {type(arch).__name__}')
    missing = [k for k in _REQUIRED_KEYS if k not in arch]
    if missing:
        raise ValueError(f'custom arch is missing required keys {missing}; '
                         f'required: {list(_REQUIRED_KEYS)}')
    unknown = sorted(set(arch) - set(_REQUIRED_KEYS) - set(_ARCH_DEFAULTS))
    if unknown:
        raise ValueError(f'custom arch has unknown keys {unknown}; allowed: '
                         f'{list(_REQUIRED_KEYS) + list(_ARCH_DEFAULTS)}')
    out = copy.deepcopy({**_ARCH_DEFAULTS, **arch})
    if not isinstance(out['depths'], (list, tuple)) or not out['depths']:
        raise ValueError(f"arch 'depths' must be a non-empty list, got {out['depths']!r}")
    num_stages = len(out['depths'])
    for k in _PER_STAGE_KEYS:
        out[k] = _per_stage(k, out[k], num_stages)
    return out


class EVTStage(nn.Module):
    """Optional downsampling followed by ``depth`` blocks, channels-last.

    Shapes: ``(B, H, W, C_in) -> (B, H', W', C)`` (``H' = ceil(H / 2)`` when downsampling).
    """

    def __init__(self, downsample: Optional[nn.Module], blocks: List[nn.Module],
                 with_cp: bool = False):
        super().__init__()
        self.downsample = downsample
        self.blocks = nn.ModuleList(blocks)
        self.with_cp = with_cp

    def forward(self, x: Tensor) -> Tensor:
        if self.downsample is not None:
            x = self.downsample(x)
        for block in self.blocks:
            if self.with_cp and x.requires_grad:
                x = cp.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x


class EVT(BaseModule):
    """EVT: Vision Transformer with Euclidean spatial decay and 1D token grouping.

    One class builds EVT-T/S/B/L, EVT-Swin-T/S/B and the RMT-T/S/B/L baseline (see
    :data:`arch_zoo`). A stage is a conv stem (or Swin patch embed) / downsampling layer
    followed by blocks ``x += CPE(x); x += mixer(LN(x)); x += FFN(LN(x))``.

    Args:
        arch (str | dict): a name in :data:`arch_zoo` (e.g. ``'evt-t'``, ``'evt-tiny'``,
            ``'t'``, ``'rmt-s'``, ``'evt-swin-b'``, ``'evt-test'``) or a dict with keys
            ``embed_dims``, ``depths``, ``num_heads`` and optionally ``init_values``,
            ``heads_ranges``, ``mlp_ratios``, ``mixers``, ``group_sizes``,
            ``layer_scales``, ``decay``, ``use_rope``, ``drop_path_rate``, ``stem``,
            ``cpe``, ``lepe``, ``ffn_dwconv``. Per-stage keys (plural names) take a list
            with one value per stage or one value for all. Defaults to ``'evt-t'``.
        in_channels (int): input image channels. Defaults to 3.
        out_indices (Sequence[int]): stages whose outputs are returned (negative indices
            count from the end). Defaults to ``(0, 1, 2, 3)``.
        frozen_stages (int): -1 freezes nothing, 0 the stem, k the stem and the first k
            stages (each with its input downsampling and output norm). Defaults to -1.
        norm_eval (bool): keep BatchNorm layers in eval mode while training. Defaults to
            False.
        with_cp (bool): gradient checkpointing per block. Defaults to False.
        drop_path_rate (float, optional): stochastic depth, linearly increasing over all
            blocks. Defaults to None (the arch's).
        norm_cfg (dict): norm of the conv stem and downsampling layers.
            Defaults to ``dict(type='BN')``.
        out_norm_cfg (dict, optional): norm applied to each returned map (channels-last);
            None returns raw stage outputs (the authors' RMT classifier has none).
            Defaults to ``dict(type='LN', eps=1e-6)``.
        decay (str, optional): ``'euclidean'``, ``'manhattan'`` or ``'none'`` for every
            stage. Defaults to None (the arch's).
        mixers (str | Sequence[str | dict], optional): per-stage token mixer, a name in
            :data:`~mmevt.models.layers.MIXERS`: ``'full'``, ``'group'``, ``'dilate'``,
            ``'group_dilate'`` (alternating g, d, ...), the 2D ``'window'``, ``'grid'`` and
            ``'window_grid'`` (alternating; for ablations), ``'decomposed'``,
            ``'external'`` or ``'routing'``; the last two also as dicts with their
            arguments, e.g. ``dict(type='routing', n_win=7, topk=4)``. Defaults to None
            (the arch's).
        group_sizes (int | Sequence[int], optional): tokens per group, per stage (a square
            ``s * s`` for the 2D mixers). Defaults to None (the arch's).
        use_rope (bool, optional): RMT's rotary shift on q, k. Defaults to None (the
            arch's: on for RMT, off for EVT).
        layer_scales (float | Sequence[float], optional): layer-scale init per stage, 0 for
            none. Defaults to None (the arch's).
        attn_impl (str): attention path: ``'auto'``, ``'reference'``, ``'sdpa'`` or
            ``'flex'``. Defaults to ``'auto'``.
        init_cfg (dict | list[dict], optional): e.g.
            ``dict(type='Pretrained', checkpoint=PATH, prefix='backbone.')``.
            Defaults to None.
        group_size, layer_scale: deprecated names of ``group_sizes`` and ``layer_scales``
            (warn; removed in the next release).

    Input ``(B, in_channels, H, W)`` with ``H, W >= 32``; output a tuple of NCHW maps with
    strides 4, 8, 16, 32 (sizes rounded up) and channels ``embed_dims[i]``.
    """
    arch_zoo = arch_zoo

    def __init__(self,
                 arch: Union[str, dict] = 'evt-t',
                 in_channels: int = 3,
                 out_indices: Sequence[int] = (0, 1, 2, 3),
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 drop_path_rate: Optional[float] = None,
                 norm_cfg: Optional[dict] = dict(type='BN'),
                 out_norm_cfg: Optional[dict] = dict(type='LN', eps=1e-6),
                 decay: Optional[str] = None,
                 mixers: Optional[Union[str, Sequence[str]]] = None,
                 group_sizes: Optional[Union[int, Sequence[int]]] = None,
                 use_rope: Optional[bool] = None,
                 layer_scales: Optional[Union[float, Sequence[float]]] = None,
                 attn_impl: str = 'auto',
                 init_cfg: Optional[Union[dict, List[dict]]] = None,
                 group_size: Optional[Union[int, Sequence[int]]] = None,
                 layer_scale: Optional[Union[float, Sequence[float]]] = None):
        super().__init__(init_cfg=init_cfg)
        group_sizes = renamed_argument('EVT', 'group_size', 'group_sizes', group_size,
                                       group_sizes)
        layer_scales = renamed_argument('EVT', 'layer_scale', 'layer_scales', layer_scale,
                                        layer_scales)
        overrides = dict(decay=decay, mixers=mixers, group_sizes=group_sizes,
                         use_rope=use_rope, layer_scales=layer_scales,
                         drop_path_rate=drop_path_rate)
        arch = resolve_arch(arch)
        arch.update({k: v for k, v in overrides.items() if v is not None})
        self.arch_settings = arch = resolve_arch(arch)
        self.attn_impl = check_choice('attn_impl', attn_impl, ATTN_IMPLS)
        self._logged_paths: set = set()
        self.num_stages = len(arch['depths'])
        self.embed_dims = arch['embed_dims']
        self.in_channels = in_channels
        self._check_arch(arch)

        self.out_indices = self._check_out_indices(out_indices)
        if not isinstance(frozen_stages, int) or not -1 <= frozen_stages <= self.num_stages:
            raise ValueError(f'frozen_stages must be an int in [-1, {self.num_stages}], '
                             f'got {frozen_stages!r}')
        self.frozen_stages, self.norm_eval = frozen_stages, norm_eval

        dims = arch['embed_dims']
        if arch['stem'] == 'conv':
            self.stem = ConvStem(in_channels, dims[0], norm_cfg)
        else:
            self.stem = PatchEmbed(in_channels, dims[0])
        # on the CPU even under a meta-device context (shape-only builds)
        dpr = torch.linspace(0, arch['drop_path_rate'], sum(arch['depths']),
                             device='cpu').tolist()
        self.stages = nn.ModuleList()
        for i in range(self.num_stages):
            if i == 0:
                downsample = None
            elif arch['stem'] == 'conv':
                downsample = ConvDownsample(dims[i - 1], dims[i], norm_cfg)
            else:
                downsample = PatchMerging(dims[i - 1], dims[i])
            first = sum(arch['depths'][:i])
            blocks = self._make_blocks(arch, i, dpr[first:first + arch['depths'][i]], attn_impl)
            self.stages.append(EVTStage(downsample, blocks, with_cp))
        for i in self.out_indices:
            self.add_module(f'norm{i}', build_norm(out_norm_cfg, dims[i]))
        self._freeze_stages()

    # ------------------------------------------------------------------ construction
    @staticmethod
    def _check_arch(arch: dict) -> None:
        check_choice('decay', arch['decay'], DECAY_KINDS)
        if arch['stem'] not in ('conv', 'patch'):
            raise ValueError(f"arch 'stem' must be 'conv' or 'patch', got {arch['stem']!r}")
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

    def _check_out_indices(self, out_indices: Sequence[int]) -> Tuple[int, ...]:
        if isinstance(out_indices, int):
            out_indices = [out_indices]
        result = []
        for idx in out_indices:
            if not isinstance(idx, int) or not -self.num_stages <= idx < self.num_stages:
                raise ValueError(f'out_indices entries must be ints in '
                                 f'[{-self.num_stages}, {self.num_stages - 1}], got {idx!r}')
            result.append(idx % self.num_stages)
        if not result:
            raise ValueError('out_indices must name at least one stage')
        return tuple(sorted(set(result)))

    @staticmethod
    def _make_blocks(arch: dict, i: int, dpr: List[float], attn_impl: str) -> List[EVTBlock]:
        dims = arch['embed_dims'][i]
        attn_kwargs = dict(
            decay=arch['decay'], group_size=arch['group_sizes'][i],
            init_value=arch['init_values'][i], heads_range=arch['heads_ranges'][i],
            use_rope=arch['use_rope'], lepe=arch['lepe'], attn_impl=attn_impl,
            cache=GridCache())  # shared by the stage's blocks: same grid, same rates
        return [
            EVTBlock(dims, build_mixer(arch['mixers'][i], j, dims, arch['num_heads'][i],
                                       **attn_kwargs),
                     arch['mlp_ratios'][i], drop, arch['layer_scales'][i], arch['cpe'],
                     arch['ffn_dwconv']) for j, drop in enumerate(dpr)
        ]

    # ------------------------------------------------------------------ init / freeze
    def init_weights(self) -> None:
        """Truncated-normal linears (std 0.02), or the ``init_cfg`` checkpoint.

        ``init_cfg=dict(type='Pretrained', checkpoint=PATH, prefix=None)`` is loaded here
        rather than by mmengine so that a missing, corrupt or mismatching file is an error
        naming the problem instead of a silent partial load: missing and unexpected keys
        are reported, shape mismatches and a checkpoint sharing no key are errors.
        """
        cfg = self.init_cfg
        if isinstance(cfg, dict) and cfg.get('type') == 'Pretrained':
            self.load_pretrained(cfg.get('checkpoint'), cfg.get('prefix'),
                                 cfg.get('map_location', 'cpu'))
            self._is_init = True
            return
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if cfg is not None:
            super().init_weights()

    def load_pretrained(self, ckpt: Optional[str], prefix: Optional[str] = None,
                        map_location: str = 'cpu') -> None:
        """Load backbone weights from ``ckpt`` (keys under ``prefix`` if given), reporting
        missing / unexpected keys and refusing shape mismatches (see :meth:`init_weights`).
        """
        from mmengine.logging import print_log
        from mmengine.runner.checkpoint import CheckpointLoader
        if not ckpt or ('://' not in str(ckpt) and not osp.isfile(ckpt)):
            raise FileNotFoundError(
                f'init_cfg.checkpoint of EVT: checkpoint file {ckpt!r} does not exist. '
                'Point init_cfg.checkpoint (e.g. model.backbone.init_cfg.checkpoint in the '
                'config, or --cfg-options) at an existing file.')
        try:
            loaded = CheckpointLoader.load_checkpoint(ckpt, map_location=map_location)
        except (RuntimeError, EOFError, OSError, zipfile.BadZipFile) as err:
            raise ValueError(f'init_cfg.checkpoint {ckpt!r} is truncated or not a PyTorch '
                             f'checkpoint: {err}') from err
        state = unwrap_state_dict(loaded)
        if prefix:
            state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        own = self.state_dict()
        shape_errors = [f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
                        for k, v in state.items() if k in own and v.shape != own[k].shape]
        if shape_errors:
            raise ValueError(f'{ckpt}: {len(shape_errors)} tensors have the wrong shape for '
                             f'this EVT arch, e.g. {shape_errors[:3]}; is it a checkpoint of '
                             'another arch?')
        matched = {k: v for k, v in state.items() if k in own}
        if not matched:
            raise ValueError(f'{ckpt}: none of its {len(state)} tensors (prefix {prefix!r}) is '
                             f'an EVT key, e.g. {sorted(state)[:3]} vs {sorted(own)[:3]}; set '
                             "init_cfg.prefix (e.g. 'backbone.') to match the checkpoint")
        self.load_state_dict(matched, strict=False)
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        print_log(f'EVT: loaded {len(matched)}/{len(own)} tensors from {ckpt}'
                  + (f'; missing (kept at init): {missing}' if missing else '')
                  + (f'; unexpected (ignored): {unexpected}' if unexpected else ''),
                  logger='current', level=logging.WARNING if missing or unexpected
                  else logging.INFO)

    def _freeze_stages(self) -> None:
        frozen = []
        if self.frozen_stages >= 0:
            frozen.append(self.stem)
        for i in range(max(self.frozen_stages, 0)):
            frozen.append(self.stages[i])
            if i in self.out_indices:
                frozen.append(getattr(self, f'norm{i}'))
        for m in frozen:
            m.eval()
            for p in m.parameters():
                p.requires_grad = False

    def train(self, mode: bool = True) -> 'EVT':
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self

    # ------------------------------------------------------------------ forward
    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """Args: x (Tensor): ``(B, in_channels, H, W)``. Returns: tuple of NCHW maps."""
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'EVT expects input of shape (B, {self.in_channels}, H, W), '
                             f'got {tuple(x.shape)}')
        if min(x.shape[-2:]) < MIN_INPUT_SIZE:
            raise ValueError(f'EVT needs H, W >= {MIN_INPUT_SIZE} (four stride-2 levels), '
                             f'got {tuple(x.shape[-2:])}; resize or pad the input')
        # a host sync per call, so off by default (MMEVT_DEBUG=1 or set_input_checks(True))
        if input_checks_enabled() and not torch.isfinite(x).all():
            bad = (~torch.isfinite(x)).nonzero()[0].tolist()
            raise ValueError(f'EVT input has NaN/Inf values, first at index {bad} '
                             f'(input checks are on: MMEVT_DEBUG or set_input_checks)')
        self._log_attention_paths(x)
        x = self.stem(x).permute(0, 2, 3, 1)
        outs = []
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i in self.out_indices:
                out = getattr(self, f'norm{i}')(x)
                outs.append(out.permute(0, 3, 1, 2).contiguous())
        return tuple(outs)

    def _log_attention_paths(self, x: Tensor) -> None:
        """Log which attention path each stage runs, once per model, device and compile state
        (the choice is the ops' :func:`~mmevt.ops.resolve_impl`; errors are left to them)."""
        situation = (x.device.type, torch.compiler.is_compiling())
        if situation in self._logged_paths:
            return
        self._logged_paths.add(situation)
        paths = []
        for i, stage in enumerate(self.stages):
            impls = dict.fromkeys(blk.attn.resolved_impl(x.device) for blk in stage.blocks
                                  if isinstance(blk.attn, SpatialDecayAttention))
            paths.append(f"{i}: {'/'.join(impls) or 'other mixer'}")
        _LOG.info(f'EVT attention paths on {x.device.type}'
                    f"{', compiled' if situation[1] else ''} (attn_impl={self.attn_impl!r}), "
                    f"per stage: {'; '.join(paths)}")

    def get_layer_depth(self, param_name: str, prefix: str = '') -> Tuple[int, int]:
        """Layer id of a parameter for layer-wise lr decay (mmpretrain's
        ``LearningRateDecayOptimWrapperConstructor``).

        The stem is layer 0, block ``j`` of stage ``i`` is ``1 + blocks before it``, a stage's
        downsampling shares the id of its first block, output norms and everything outside
        the backbone get the last id.

        Returns:
            tuple[int, int]: ``(layer_id, num_layers)``.
        """
        num_layers = sum(self.arch_settings['depths']) + 2
        if not param_name.startswith(prefix):
            return num_layers - 1, num_layers
        name = param_name[len(prefix):]
        if name.startswith('stem'):
            return 0, num_layers
        if name.startswith('stages.'):
            parts = name.split('.')
            stage = int(parts[1])
            before = sum(self.arch_settings['depths'][:stage])
            block = int(parts[3]) if parts[2] == 'blocks' else 0
            return before + block + 1, num_layers
        return num_layers - 1, num_layers
