"""The timm model of every EVT / EVT-Swin / RMT arch: :class:`EVTClassifier`, its pretrained
configs and the registered entrypoints (``evt_tiny`` ... ``rmt_large``); the checkpoint
filter is :mod:`mmevt.timm.weights`.

The model follows the contract of timm's hierarchical models (as in timm's
``swin_transformer.py``): ``forward_features`` / ``forward_head(pre_logits=)``,
``reset_classifier`` / ``get_classifier``, ``feature_info``, ``forward_intermediates`` /
``prune_intermediate_layers`` (``features_only=True`` wraps it in timm's
``FeatureGetterNet``), ``set_grad_checkpointing``, ``group_matcher``, ``no_weight_decay``.
Its parameters are named as mmpretrain's classifier of the same arch
(``configs/cls/*``: ``backbone.*``, ``neck.*``, ``head.fc.*``), so a toolkit checkpoint or
a converted RMT checkpoint loads without renaming (:func:`checkpoint_filter_fn`).
"""
from contextlib import nullcontext
from typing import Any, Dict, List, Optional, Set, Tuple, Union

import torch
from timm.layers import ClassifierHead, get_device_dtype, register_notrace_module
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices  # what timm's own models use
from torch import Tensor, nn

from ..models.backbones.archs import (ARCH_ALIASES, ARCH_FAMILIES, MIN_INPUT_SIZE,
                                      canonical_name, resolve_arch)
from ..models.backbones.evt import EVT, EVTStage, init_linear_and_norm
from ..models.layers import ConvStem, PatchEmbed
from ..models.necks import RMTClsNeck
from .weights import checkpoint_filter_fn

# the families registered with timm (the tiny test archs are not)
FAMILIES = ('evt', 'evt-swin', 'rmt')
# the classifier of each family as mmpretrain builds it from configs/cls: RMT's pre-logits
# neck (Linear to 1024, BN, Swish per token, then average pool) for EVT and RMT; Swin's
# head (LayerNorm on the last map, average pool) for EVT-Swin (0: no neck)
PRE_LOGITS_DIMS = {'evt': 1024, 'rmt': 1024, 'evt-swin': 0}
PAPERS = {'evt': ('Advancing Vision Transformer with Enhanced Spatial Priors', 'arXiv:2604.18549'),
          'evt-swin': ('Advancing Vision Transformer with Enhanced Spatial Priors',
                       'arXiv:2604.18549'),
          'rmt': ('RMT: Retentive Networks Meet Vision Transformers', 'arXiv:2309.11523')}
OUT_NORM_EPS = 1e-6  # EVT's output LayerNorm (EVT-Swin's final norm)

# timm's FX tracer keeps these as leaves: their forward sizes tensors from the input's
# shape (padding, groups, decay grids), which symbolic tracing cannot follow
for _leaf in (EVTStage, ConvStem, PatchEmbed):
    register_notrace_module(_leaf)


def _family(canonical: str) -> str:
    for family in FAMILIES:
        if canonical in ARCH_FAMILIES[family]:
            return family
    raise ValueError(f'arch {canonical!r} is not registered with timm; the families that are: '
                     f'{ {f: list(ARCH_FAMILIES[f]) for f in FAMILIES} }')


def timm_name(arch: str) -> str:
    """The timm name of an arch of the zoo: its longest alias, ``-`` written ``_``.

    ``'evt-t'`` -> ``'evt_tiny'``, ``'evt-swin-b'`` -> ``'evt_swin_base'``,
    ``'rmt-l'`` -> ``'rmt_large'`` (timm's style: lower case, underscores, size words as
    ``convnext_tiny``; no input size in the name, as the models take any size >= 32).

    Raises:
        ValueError: not an arch or alias of the zoo, or one of the test archs.
    """
    canonical = canonical_name(arch)
    family = _family(canonical)
    names = [a for a, c in ARCH_ALIASES.items() if c == canonical and a.startswith(family + '-')]
    return max(names, key=len).replace('-', '_')


# timm name -> canonical arch, for every arch of the registered families
TIMM_NAMES: Dict[str, str] = {timm_name(a): a for f in FAMILIES for a in ARCH_FAMILIES[f]}


class EVTClassifier(nn.Module):
    """An EVT / EVT-Swin / RMT ImageNet classifier as a timm model.

    ``backbone`` is mmevt's :class:`~mmevt.models.EVT` (last stage out, the stages called
    one by one), then the family's pre-logits (``neck``, RMT's, or the backbone's final
    LayerNorm for EVT-Swin), then timm's ``ClassifierHead`` (``head``: pool, dropout, ``fc``).

    Args:
        arch (str | dict): an arch of :data:`mmevt.models.arch_zoo` (name or alias) or a
            custom arch dict (:class:`~mmevt.models.EVT`). Defaults to ``'evt-t'``.
        in_chans (int): input channels. Defaults to 3.
        num_classes (int): classes; 0 leaves out the classifier (pooled features out).
            Defaults to 1000.
        global_pool (str): timm's pooling type (``'avg'``, ``'max'``, ``'avgmax'``,
            ``'catavgmax'``; ``''`` returns the unpooled map). Defaults to ``'avg'``.
        drop_rate (float): dropout before the classifier. Defaults to 0.
        drop_path_rate (float, optional): stochastic depth; None takes the arch's.
            Defaults to None.
        pre_logits_dims (int): width of RMT's pre-logits neck; 0 uses a final LayerNorm
            instead (Swin's head). Defaults to 1024.
        attn_impl (str): the attention path (:data:`mmevt.ops.ATTN_IMPLS`). Defaults to
            ``'auto'``.
        device (torch.device | str, optional): where parameters are created (timm's factory
            argument). Defaults to None (the default device).
        dtype (torch.dtype, optional): parameter dtype. Defaults to None (the default).

    Shapes: ``forward``: ``(B, in_chans, H, W) -> (B, num_classes)`` for ``H, W >= 32``;
    ``forward_features``: ``-> (B, num_features, ceil(H / 32), ceil(W / 32))``.
    """

    def __init__(self, arch: Union[str, dict] = 'evt-t', in_chans: int = 3,
                 num_classes: int = 1000, global_pool: str = 'avg', drop_rate: float = 0.,
                 drop_path_rate: Optional[float] = None, pre_logits_dims: int = 1024,
                 attn_impl: str = 'auto', device: Optional[Union[str, torch.device]] = None,
                 dtype: Optional[torch.dtype] = None):
        super().__init__()
        if not isinstance(num_classes, int) or num_classes < 0:
            raise ValueError(f'num_classes must be an int >= 0, got {num_classes!r}')
        if not isinstance(pre_logits_dims, int) or pre_logits_dims < 0:
            raise ValueError(f'pre_logits_dims must be an int >= 0 (0: final LayerNorm), got '
                             f'{pre_logits_dims!r}')
        dims = resolve_arch(arch)['embed_dims']
        self.in_chans, self.num_classes, self.global_pool = in_chans, num_classes, global_pool
        self.output_fmt = 'NCHW'
        self.grad_checkpointing = False
        with torch.device(device) if device is not None else nullcontext():
            self.backbone = EVT(
                arch, in_channels=in_chans, out_indices=(-1, ), drop_path_rate=drop_path_rate,
                out_norm_cfg=None if pre_logits_dims else dict(type='LN', eps=OUT_NORM_EPS),
                attn_impl=attn_impl)
            self.neck = RMTClsNeck(dims[-1], pre_logits_dims) if pre_logits_dims else None
            self.num_features = pre_logits_dims or dims[-1]
            self.head = ClassifierHead(self.num_features, num_classes, pool_type=global_pool,
                                       drop_rate=drop_rate, input_fmt=self.output_fmt)
        self.head_hidden_size = self.head.num_features
        self._final_norm = f'norm{len(dims) - 1}'
        # stage i: stride 4 * 2 ** i (sizes rounded up), named as the backbone's module
        self.feature_info = [dict(num_chs=c, reduction=4 * 2 ** i, module=f'backbone.stages.{i}')
                             for i, c in enumerate(dims)]
        init_linear_and_norm(self)
        if dtype is not None:
            self.to(dtype=dtype)

    # ------------------------------------------------------------------ timm's API
    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> Dict[str, Any]:
        """Parameter groups for timm's layer decay: the stem first, then a stage (coarse)
        or a block (a stage's downsampling with its first block), the final norm / neck last.
        """
        return dict(
            stem=r'^backbone\.stem',
            blocks=r'^backbone\.stages\.(\d+)' if coarse else [
                (r'^backbone\.stages\.(\d+)\.downsample', (0, )),
                (r'^backbone\.stages\.(\d+)\.blocks\.(\d+)', None),
                (r'^backbone\.norm\d+|^neck\.', (99999, )),
            ])

    @torch.jit.ignore
    def no_weight_decay(self) -> Set[str]:
        """Names to keep out of weight decay besides timm's own rule (1-D tensors, biases):
        none. EVT's decay rates are not parameters; what remains are weights."""
        return set()

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Checkpoint every block (the backbone's ``with_cp``) while training."""
        self.grad_checkpointing = enable
        for stage in self.backbone.stages:
            stage.with_cp = enable

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        """The classifier layer (``head.fc``; ``nn.Identity`` with 0 classes)."""
        return self.head.fc

    def reset_classifier(self, num_classes: int, global_pool: Optional[str] = None) -> None:
        """A new classifier of ``num_classes`` (0: none) on the same device and dtype;
        ``global_pool`` changes the pooling (``''``: none), None keeps it."""
        dd = get_device_dtype(self)
        self.num_classes = num_classes
        self.head.reset(num_classes, pool_type=global_pool, in_features=self.num_features, **dd)
        self.head_hidden_size = self.head.num_features
        if global_pool is not None:
            self.global_pool = global_pool

    # ------------------------------------------------------------------ forward
    def _stem(self, x: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, H / 4, W / 4, C0)``, the input checked first (not while
        timm's FX tracer passes a proxy)."""
        if not isinstance(x, torch.fx.Proxy):
            self.backbone.check_input(x)
        return self.backbone.stem(x).permute(0, 2, 3, 1)

    def _final(self, x: Tensor) -> Tensor:
        """The last stage's map (channels-last) -> the final features (NCHW): RMT's
        pre-logits projection, or the final LayerNorm (EVT-Swin)."""
        if self.neck is not None:
            return self.neck.project(x.permute(0, 3, 1, 2))
        return getattr(self.backbone, self._final_norm)(x).permute(0, 3, 1, 2)

    def forward_features(self, x: Tensor) -> Tensor:
        """``(B, in_chans, H, W) -> (B, num_features, ceil(H / 32), ceil(W / 32))``."""
        x = self._stem(x)
        for stage in self.backbone.stages:
            x = stage(x)
        return self._final(x)

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """Pool, dropout and classify ``forward_features``' map; ``pre_logits`` stops
        before the classifier: ``(B, head_hidden_size)``."""
        return self.head(x, pre_logits=True) if pre_logits else self.head(x)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, in_chans, H, W) -> (B, num_classes)`` (pooled features with 0 classes)."""
        return self.forward_head(self.forward_features(x))

    def forward_intermediates(
            self, x: Tensor, indices: Optional[Union[int, List[int]]] = None,
            norm: bool = False, stop_early: bool = False, output_fmt: str = 'NCHW',
            intermediates_only: bool = False) -> Union[List[Tensor], Tuple[Tensor, List[Tensor]]]:
        """The stage outputs (timm's ``forward_intermediates``).

        Args:
            x (Tensor): ``(B, in_chans, H, W)``.
            indices (int | list[int], optional): stages to return: the last n (int), these
                (list, negative from the end) or all (None). Defaults to None.
            norm (bool): the final LayerNorm on the last stage's map (EVT-Swin; RMT's
                projection is no norm and never applied to an intermediate).
                Defaults to False.
            stop_early (bool): stop after the last stage asked for. Defaults to False.
            output_fmt (str): ``'NCHW'``, the only format. Defaults to ``'NCHW'``.
            intermediates_only (bool): return only the intermediates. Defaults to False.

        Returns:
            list[Tensor] | tuple: stage ``i`` as ``(B, C_i, ceil(H / 2 ** (i + 2)), ...)``;
            with ``intermediates_only=False`` first the final features (as
            ``forward_features``, when the last stage ran).
        """
        if output_fmt != 'NCHW':
            raise ValueError(f"output_fmt must be 'NCHW', got {output_fmt!r}")
        stages = self.backbone.stages
        last = len(stages) - 1
        take_indices, max_index = feature_take_indices(len(stages), indices)
        if stop_early:
            stages = stages[:max_index + 1]
        intermediates = []
        x = self._stem(x)
        i = 0
        for i, stage in enumerate(stages):
            x = stage(x)
            if i in take_indices:
                out = x
                if norm and i == last and self.neck is None:
                    out = getattr(self.backbone, self._final_norm)(out)
                intermediates.append(out.permute(0, 3, 1, 2).contiguous())
        if intermediates_only:
            return intermediates
        x = self._final(x) if i == last else x.permute(0, 3, 1, 2)
        return x, intermediates

    def prune_intermediate_layers(self, indices: Union[int, List[int]] = 1,
                                  prune_norm: bool = False, prune_head: bool = True) -> List[int]:
        """Drop the stages after the last of ``indices`` (timm's contract).

        The final features' layer (neck or final norm) goes with ``prune_norm`` or when
        stages go; the classifier with ``prune_head`` or when the final width changes.

        Returns:
            list[int]: the stage indices kept, from 0.
        """
        num_stages = len(self.backbone.stages)
        take_indices, max_index = feature_take_indices(num_stages, indices)
        if prune_norm or max_index < num_stages - 1:
            self.neck = None
            setattr(self.backbone, self._final_norm, nn.Identity())
        self.backbone.stages = self.backbone.stages[:max_index + 1]
        width = self.feature_info[max_index]['num_chs'] if self.neck is None \
            else self.num_features
        if prune_head or width != self.num_features:
            self.num_features = width
            self.reset_classifier(0, '')
        return take_indices


def default_cfg(arch: str, **overrides: Any) -> Dict[str, Any]:
    """The pretrained config of a zoo arch as timm reads it (no weights are hosted:
    ``pretrained=True`` needs ``pretrained_cfg_overlay=dict(file=PATH)``).

    ImageNet-1k classes, mean / std and the test crop of ``configs/cls`` (resize the short
    side to 256, centre crop 224, bicubic: ``crop_pct`` 0.875); any input size >= 32.
    """
    family = _family(canonical_name(arch))
    stem = resolve_arch(arch)['stem']
    paper, paper_id = PAPERS[family]
    cfg = dict(
        num_classes=1000, input_size=(3, 224, 224), pool_size=(7, 7),
        min_input_size=(3, MIN_INPUT_SIZE, MIN_INPUT_SIZE), fixed_input_size=False,
        crop_pct=0.875, interpolation='bicubic', mean=(0.485, 0.456, 0.406),
        std=(0.229, 0.224, 0.225),
        first_conv='backbone.stem.0.conv' if stem == 'conv' else 'backbone.stem.proj',
        classifier='head.fc', license='apache-2.0', paper_name=paper, paper_ids=paper_id,
        origin_url='https://github.com/qhfan/RMT' if family == 'rmt' else None)
    cfg.update(overrides)
    return cfg


default_cfgs = generate_default_cfgs({name: default_cfg(arch) for name, arch in TIMM_NAMES.items()})


def _create(variant: str, pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """Build ``variant`` through timm's ``build_model_with_cfg`` (pretrained loading,
    ``features_only`` through ``forward_intermediates``)."""
    arch = TIMM_NAMES[variant]
    out_indices = kwargs.pop('out_indices', tuple(range(len(resolve_arch(arch)['depths']))))
    kwargs.setdefault('pre_logits_dims', PRE_LOGITS_DIMS[_family(arch)])
    return build_model_with_cfg(
        EVTClassifier, variant, pretrained, arch=arch,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(feature_cls='getter', out_indices=out_indices), **kwargs)


# The timm entrypoints, one per arch of :data:`TIMM_NAMES`, written as timm's own models write
# theirs (``@register_model def convnext_tiny(pretrained=False, **kwargs)``): registered on
# the first import of this module; tests/test_timm.py checks they are TIMM_NAMES, no more.


@register_model
def evt_tiny(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """EVT-T (``evt_tiny``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('evt_tiny', pretrained, **kwargs)


@register_model
def evt_small(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """EVT-S (``evt_small``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('evt_small', pretrained, **kwargs)


@register_model
def evt_base(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """EVT-B (``evt_base``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('evt_base', pretrained, **kwargs)


@register_model
def evt_large(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """EVT-L (``evt_large``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('evt_large', pretrained, **kwargs)


@register_model
def evt_swin_tiny(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """EVT-Swin-T (``evt_swin_tiny``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('evt_swin_tiny', pretrained, **kwargs)


@register_model
def evt_swin_small(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """EVT-Swin-S (``evt_swin_small``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('evt_swin_small', pretrained, **kwargs)


@register_model
def evt_swin_base(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """EVT-Swin-B (``evt_swin_base``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('evt_swin_base', pretrained, **kwargs)


@register_model
def rmt_tiny(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """RMT-T (``rmt_tiny``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('rmt_tiny', pretrained, **kwargs)


@register_model
def rmt_small(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """RMT-S (``rmt_small``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('rmt_small', pretrained, **kwargs)


@register_model
def rmt_base(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """RMT-B (``rmt_base``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('rmt_base', pretrained, **kwargs)


@register_model
def rmt_large(pretrained: bool = False, **kwargs: Any) -> EVTClassifier:
    """RMT-L (``rmt_large``): mmevt's arch as a timm model, see :class:`EVTClassifier`."""
    return _create('rmt_large', pretrained, **kwargs)


__all__ = ['EVTClassifier', 'TIMM_NAMES', 'checkpoint_filter_fn', 'default_cfg', 'timm_name']
