"""The EVT backbone (EVT, EVT-Swin and the RMT baseline) for OpenMMLab 2.x.

The arch table and its checks are in :mod:`.archs`, pretrained loading in
:mod:`mmevt.utils.checkpoint`, the attention-path log next to the attention module. This
module imports only torch, mmengine and mmevt's own ops/layers, so it runs on machines
without mmcv's compiled ops or any OpenMMLab toolkit.
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.utils.checkpoint as cp
from mmengine.model import BaseModule
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from ...ops import ATTN_IMPLS, GridCache, input_checks_enabled
from ...ops.checks import check_choice, renamed_argument
from ...utils.checkpoint import load_backbone_checkpoint
from ..layers import (ConvDownsample, ConvStem, EVTBlock, PatchEmbed, PatchMerging,
                      build_mixer, build_norm)
from ..layers.attention import log_attention_paths
from ..layers.mixers import keyword_arguments, mixer_class, mixer_type, takes_arguments
from .archs import MIN_INPUT_SIZE, arch_zoo, check_arch, resolve_arch

# what the backbone itself fills in from the arch and its arguments; layer_cfgs cannot
_BLOCK_FILLED = ('embed_dims', 'mixer', 'mlp_ratio', 'drop_path', 'layer_scale', 'cpe',
                 'ffn_dwconv')
_ATTN_FILLED = ('embed_dims', 'num_heads', 'mode', 'decay', 'group_size', 'init_value',
                'heads_range', 'use_rope', 'lepe', 'attn_impl', 'cache')


def layer_cfg_keys(mixer: Union[str, dict]) -> List[str]:
    """The keys ``layer_cfgs`` may set in a stage of token mixer ``mixer``.

    The keyword options of :class:`EVTBlock` and of the mixer's module, less what the
    backbone fills in itself from the arch and its arguments.

    Args:
        mixer (str | dict): a name of :data:`~mmevt.models.layers.MIXERS` or a dict with
            such a ``'type'``.

    Returns:
        list[str]: the block's keys first, then the mixer's, each once.
    """
    name = mixer_type(mixer)
    attn_filled = () if takes_arguments(name) else _ATTN_FILLED
    keys = [k for k in keyword_arguments(EVTBlock) if k not in _BLOCK_FILLED]
    keys += [k for k in keyword_arguments(mixer_class(name))
             if k not in attn_filled + ('embed_dims', 'num_heads') + tuple(keys)]
    return keys


def init_linear_and_norm(model: nn.Module) -> None:
    """EVT's initialisation of ``model``'s modules, in place: linears truncated normal
    (std 0.02) with zero bias, LayerNorms ones / zeros (mmpretrain's classifier
    ``init_cfg`` for the neck and head, the same)."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


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
        # the decay tables' cache its blocks share (None: no decay attention)
        self.cache = next((b.attn.cache for b in blocks if getattr(b, 'decay_attn', False)),
                          None)

    def forward(self, x: Tensor) -> Tensor:
        if self.downsample is not None:
            x = self.downsample(x)
        # each decay table once per forward pass, also under torch.compile
        tables = self.cache.forward_tables() if self.cache is not None else None
        # a compiled checkpoint may not write to what lives outside it: there each block
        # builds its own tables
        cp_tables = None if torch.compiler.is_compiling() else tables
        for block in self.blocks:
            if self.with_cp and x.requires_grad:
                x = cp.checkpoint(block, x, cp_tables, use_reentrant=False)
            else:
                x = block(x, tables)
        return x


class EVT(BaseModule):
    """EVT: Vision Transformer with Euclidean spatial decay and 1D token grouping.

    One class builds every arch of :data:`arch_zoo` (EVT, EVT-Swin and the RMT baseline:
    :data:`~.archs.ARCH_FAMILIES`). A stage is a conv stem (or Swin patch embed) /
    downsampling layer followed by blocks ``x += CPE(x); x += mixer(LN(x)); x += FFN(LN(x))``.

    Args:
        arch (str | dict): a name in :data:`~.archs.ARCH_NAMES` or an alias in
            :data:`~.archs.ARCH_ALIASES`, any case (e.g. ``'evt-t'``, ``'evt-tiny'``,
            ``'t'``) or a dict with keys ``embed_dims``, ``depths``, ``num_heads`` and
            optionally ``init_values``, ``heads_ranges``, ``mlp_ratios``, ``mixers``,
            ``group_sizes``, ``layer_scales``, ``decay``, ``use_rope``, ``drop_path_rate``,
            ``stem``, ``cpe``, ``lepe``, ``ffn_dwconv``. Per-stage keys (plural names) take a list
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
        decay (str, optional): a name in :data:`~mmevt.ops.decay.DECAY_KINDS`, for every
            stage. Defaults to None (the arch's).
        mixers (str | Sequence[str | dict], optional): per-stage token mixer, a name in
            :data:`~mmevt.models.layers.MIXERS` (every layout of
            :data:`mmevt.ops.grouping.LAYOUTS`, cycles of layouts such as
            ``'group_dilate'``, and other token-mixer modules); a module also as a dict
            with its arguments, e.g. ``dict(type='routing', n_win=7, topk=4)``. Defaults
            to None (the arch's).
        group_sizes (int | Sequence[int], optional): tokens per group, per stage (a square
            ``s * s`` for the 2D mixers). Defaults to None (the arch's).
        use_rope (bool, optional): RMT's rotary shift on q, k. Defaults to None (the
            arch's: on for RMT, off for EVT).
        layer_scales (float | Sequence[float], optional): layer-scale init per stage, 0 for
            none. Defaults to None (the arch's).
        attn_impl (str): attention path, a name in
            :data:`~mmevt.ops.attention.ATTN_IMPLS`. Defaults to ``'auto'``.
        layer_cfgs (dict | Sequence[dict], optional): options passed through to every
            block (:class:`~mmevt.models.layers.EVTBlock`) and its token mixer, one dict for
            all stages or one per stage, e.g. ``dict(attn_drop_rate=0.1)`` (attention
            dropout, train-only, as Swin's). Each key goes to the module whose ``__init__``
            takes it; a key no module of the stage takes, or one the arch sets, is an error
            naming the keys allowed. Defaults to None (no options).
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
                 layer_cfgs: Optional[Union[dict, Sequence[dict]]] = None,
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
        check_arch(arch)
        self.layer_cfgs = self._check_layer_cfgs(layer_cfgs, arch)

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
            blocks = self._make_blocks(arch, i, dpr[first:first + arch['depths'][i]], attn_impl,
                                       self.layer_cfgs[i])
            self.stages.append(EVTStage(downsample, blocks, with_cp))
        for i in self.out_indices:
            self.add_module(f'norm{i}', build_norm(out_norm_cfg, dims[i]))
        self._freeze_stages()

    # ------------------------------------------------------------------ construction
    def _check_layer_cfgs(self, layer_cfgs: Optional[Union[dict, Sequence[dict]]],
                          arch: dict) -> List[dict]:
        """One options dict per stage, each key taken by the stage's block or mixer."""
        if layer_cfgs is None:
            layer_cfgs = {}
        if isinstance(layer_cfgs, dict):
            layer_cfgs = [layer_cfgs] * self.num_stages
        elif (not isinstance(layer_cfgs, (list, tuple)) or len(layer_cfgs) != self.num_stages
              or not all(isinstance(c, dict) for c in layer_cfgs)):
            raise ValueError(f'layer_cfgs must be a dict or a list of {self.num_stages} dicts '
                             f'(one per stage), got {layer_cfgs!r}')
        out = []
        for i, cfg in enumerate(layer_cfgs):
            name = mixer_type(arch['mixers'][i])
            allowed = layer_cfg_keys(name)
            bad = sorted(set(cfg) - set(allowed))
            if bad:
                raise ValueError(f'layer_cfgs[{i}] has keys {bad} that no module of stage {i} '
                                 f'takes as an option (EVTBlock, mixer {name!r}); allowed: '
                                 f'{allowed} (the arch and EVT arguments set the others)')
            out.append(dict(cfg))
        return out

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
    def _make_blocks(arch: dict, i: int, dpr: List[float], attn_impl: str,
                     options: Dict[str, object]) -> List[EVTBlock]:
        """The blocks of stage ``i``: settings from the arch, ``options`` passed through."""
        dims, mixer = arch['embed_dims'][i], arch['mixers'][i]
        block_keys = set(keyword_arguments(EVTBlock))
        block_opts = {k: v for k, v in options.items() if k in block_keys}
        mixer_opts = {k: v for k, v in options.items() if k not in block_keys}
        if not takes_arguments(mixer_type(mixer)):  # the arch describes decay attention
            mixer_opts.update(
                decay=arch['decay'], group_size=arch['group_sizes'][i],
                init_value=arch['init_values'][i], heads_range=arch['heads_ranges'][i],
                use_rope=arch['use_rope'], lepe=arch['lepe'], attn_impl=attn_impl,
                cache=GridCache())  # shared by the stage's blocks: same grid, same rates
        return [
            EVTBlock(dims, build_mixer(mixer, j, dims, arch['num_heads'][i], **mixer_opts),
                     arch['mlp_ratios'][i], drop, arch['layer_scales'][i], arch['cpe'],
                     arch['ffn_dwconv'], **block_opts) for j, drop in enumerate(dpr)
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
        init_linear_and_norm(self)
        if cfg is not None:
            super().init_weights()

    def load_pretrained(self, ckpt: Optional[str], prefix: Optional[str] = None,
                        map_location: str = 'cpu') -> None:
        """Load backbone weights from ``ckpt`` (keys under ``prefix`` if given), reporting
        missing / unexpected keys and refusing shape mismatches (see :meth:`init_weights`).
        """
        load_backbone_checkpoint(self, ckpt, prefix, map_location, owner='EVT')

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
    def check_input(self, x: Tensor) -> None:
        """Refuse an input EVT cannot run, naming what is wrong, and log the attention path
        each stage takes (once per kind of input).

        Args:
            x (Tensor): ``(B, in_channels, H, W)`` with ``H, W >= 32``.

        Raises:
            ValueError: another shape, a side under 32, or (input checks on) NaN / Inf.
        """
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
        log_attention_paths('EVT', [[blk.attn for blk in stage.blocks] for stage in self.stages],
                            x, self.attn_impl, self._logged_paths)

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """Args: x (Tensor): ``(B, in_channels, H, W)``. Returns: tuple of NCHW maps."""
        self.check_input(x)
        x = self.stem(x).permute(0, 2, 3, 1)
        outs = []
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i in self.out_indices:
                out = getattr(self, f'norm{i}')(x)
                outs.append(out.permute(0, 3, 1, 2).contiguous())
        return tuple(outs)

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
