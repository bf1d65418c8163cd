"""Swap EVT into any OpenMMLab config: write a short config inheriting it.

    python tools/misc/swap_backbone.py SRC --arch ARCH --out DST [--pretrained PATH]
        [--recipe evt|keep] [--check] [--overwrite]

``SRC`` is a config file or a toolkit path (``mmdet::``, ``mmseg::``, ``mmpretrain::``).
``DST`` inherits it (``_base_``) and overrides only what changes, with a comment per
override: ``custom_imports``, the backbone (``_delete_=True``), the input channels of the
modules that read the backbone, and with ``--recipe evt`` the optimizer.

Nothing is guessed from channel values alone: the original backbone is built on the CPU and
run once at :data:`PROBE_SIZE`, which gives the channels and strides of its outputs. Each
output goes to the EVT stage of the same stride (:data:`EVT_STRIDES`); an output whose stride
does not grow over the previous output's (a dilated backbone: mmseg's ``*-d8`` ResNets keep
stride 8 in their last stages) goes to the next EVT stage, since EVT has no dilation (the
decode heads resize their inputs, so they accept the coarser maps). The consumers are the
neck (the modules the toolkit feeds the backbone's outputs to), else the heads, including
nested ones (KNet's ``kernel_generate_head``), and a neck that only pools (mmpretrain's
``GlobalAveragePooling``) passes its input on to the head. Only their input-channel keys
change (``in_channels``, read through ``in_index`` where the head has one, and
``c1_in_channels``), and each old value must equal what the built backbone measured, else the
swap stops with an error naming the module.

``--recipe evt`` takes the optimizer (AdamW, lr, weight decay, no-decay rules), the backbone's
drop path and norm (SyncBN) from our own config of the same family and arch
(:data:`FAMILY_CONFIGS`), loaded with mmengine; query-based models (DETR family, Sparse R-CNN,
MaskFormer / Mask2Former, KNet) keep their own AdamW recipe, since none of our families
matches them (see :func:`recipe_family`). ``--check`` builds the written config, runs one
training step and one prediction on a generated batch and prints params / FLOPs before and
after (:func:`check_config`).
"""
import argparse
import contextlib
import copy
import glob
import logging
import math
import os
import os.path as osp
import re
import sys
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .apis.launch import config_toolkit
from .models.backbones.archs import ARCH_NAMES, canonical_name, resolve_arch

EVT_STRIDES = (4, 8, 16, 32)
# Side of the square input the original backbone is probed with (a multiple of 32, so that
# every stride up to 32 divides it and the output sizes give the strides exactly); ImageNet's
# 224 for classifiers, whose backbones may not pad (mmpretrain's Swin needs its 7 x 7
# windows at stride 32).
PROBE_SIZE = dict(mmdet=128, mmseg=128, mmpretrain=224)
# Our config holding each family's recipe; ``{arch}`` is the EVT arch (configs/ layout).
FAMILY_CONFIGS = {
    'mask_rcnn': 'det/mask_rcnn/mask-rcnn_{arch}_fpn_1x_coco.py',
    'cascade': 'det/cascade_rcnn/cascade-mask-rcnn_{arch}_fpn_ms-3x_coco.py',
    'retinanet': 'det/retinanet/retinanet_{arch}_fpn_1x_coco.py',
    'sem_fpn': 'seg/sem_fpn/fpn_{arch}_8xb2-80k_ade20k-512x512.py',
    'upernet': 'seg/upernet/upernet_{arch}_8xb2-160k_ade20k-512x512.py',
    'cls': 'cls/*/{arch}_*xb*_in1k.py',
}
# The arch whose config holds a family's shared recipe (the other sizes inherit it).
SHARED_RECIPE_ARCH = 'evt-t'
# Query-based models: set-prediction decoders whose AdamW recipes (backbone lr x0.1,
# gradient clipping) none of our families matches; --recipe evt keeps their optimizer.
QUERY_BASED_MODELS = ('DETR', 'ConditionalDETR', 'DABDETR', 'DeformableDETR', 'DINO',
                      'DDQDETR', 'SparseRCNN', 'QueryInst', 'MaskFormer', 'Mask2Former')
QUERY_BASED_HEADS = ('MaskFormerHead', 'Mask2FormerHead', 'IterativeDecodeHead')
# Model keys holding a head that reads the backbone when there is no neck.
HEAD_KEYS = ('decode_head', 'auxiliary_head', 'head', 'panoptic_head', 'bbox_head',
             'rpn_head', 'mask_head')
# The keys that name a module's inputs from the backbone.
CHANNEL_KEYS = ('in_channels', 'c1_in_channels')
# ImageNet normalisation of EVT's classification configs (mmpretrain's; RGB).
IMAGENET_MEAN = [123.675, 116.28, 103.53]
IMAGENET_STD = [58.395, 57.12, 57.375]


@dataclass
class BackboneOutputs:
    """What the original backbone returns, measured by running it.

    Attributes:
        type (str): the backbone's registry name.
        channels (list[int]): channels of each output.
        strides (list[int | None]): stride of each output; None for a pooled ``(B, C)``
            output (e.g. a ViT's class token, ConvNeXt's pooled features).
    """
    type: str
    channels: List[int]
    strides: List[Optional[int]]

    def describe(self) -> str:
        return ', '.join(f'{c}@{"pooled" if s is None else f"1/{s}"}'
                         for c, s in zip(self.channels, self.strides))


@dataclass
class Override:
    """One override of ``model`` in the written config: ``path`` (keys from ``model``;
    an int indexes a list of heads), the new values, and why."""
    path: Tuple[Any, ...]
    values: Dict[str, Any]
    why: str


@dataclass
class SwapPlan:
    """Everything the written config says, and the notes printed to the user."""
    src: str
    arch: str
    toolkit: str
    outputs: BackboneOutputs
    stages: List[int]
    backbone: Dict[str, Any]
    overrides: List[Override] = field(default_factory=list)
    top_level: List[Tuple[str, Any, str]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    recipe_note: str = ''


# ---------------------------------------------------------------------------- helpers
def _plain(value: Any) -> Any:
    """ConfigDict / nested containers -> plain dicts and lists (tuples kept)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _canonical_arch(arch: str) -> str:
    """The canonical name of ``arch`` (an arch name or alias, any case): our configs'."""
    try:
        return canonical_name(arch)
    except ValueError as err:  # its text offers an arch dict, which --arch cannot take
        raise ValueError(f'--arch must be one of {list(ARCH_NAMES)}, got {arch!r}') from err


def load_src(src: str):
    """``Config.fromfile(src)`` after ``import mmevt``, with an error naming a missing SRC."""
    import mmevt  # noqa: F401  (mmevt:: paths, EVT in the registries)
    from mmengine.config import Config
    path = src
    if '::' in src:
        try:  # the toolkit's own .mim/configs, as a `_base_ = 'pkg::path'` resolves it
            path, _ = Config._get_cfg_path(src, os.getcwd())
        except Exception as err:
            raise ValueError(f'SRC {src!r}: {err}') from err
    if not osp.isfile(path):
        raise FileNotFoundError(f'SRC config {src!r} does not exist (give a file or a '
                                "'mmdet::' / 'mmseg::' / 'mmpretrain::' path)")
    return Config.fromfile(path)


def _scoped(toolkit: str):
    from mmengine.registry import DefaultScope
    return DefaultScope.overwrite_default_scope(toolkit)


def _build(toolkit: str, cfg: dict):
    from mmengine.config import ConfigDict
    from mmengine.registry import MODELS
    with _scoped(toolkit):
        return MODELS.build(ConfigDict(copy.deepcopy(cfg)))


# ---------------------------------------------------------------------------- measure
def measure_backbone(backbone_cfg: dict, toolkit: str,
                     size: Optional[int] = None) -> Tuple[BackboneOutputs, Any]:
    """Build the original backbone on the CPU (no weights loaded) and run it on a
    ``(1, 3, size, size)`` input (``size`` defaults to the toolkit's :data:`PROBE_SIZE`).

    Returns:
        tuple: the measured :class:`BackboneOutputs` and the built backbone.
    """
    import torch
    size = size or PROBE_SIZE[toolkit]
    cfg = _plain(backbone_cfg)
    cfg.pop('init_cfg', None)  # the architecture only: no download, no checkpoint
    cfg.pop('pretrained', None)
    name = cfg.get('type', '?')
    if name == 'EVT':
        raise ValueError('SRC already has an EVT backbone: swap from the original config')
    try:
        backbone = _build(toolkit, cfg)
    except Exception as err:
        raise ValueError(f'cannot build the original backbone {name} of SRC to measure its '
                         f'outputs: {type(err).__name__}: {err}') from err
    backbone.eval()
    with torch.no_grad():
        try:
            outs = backbone(torch.zeros(1, 3, size, size))
        except Exception as err:
            raise ValueError(f'the original backbone {name} fails on a {size} x {size} '
                             f'input: {type(err).__name__}: {err}') from err
    if isinstance(outs, torch.Tensor):
        outs = (outs, )
    channels, strides = [], []
    for i, out in enumerate(outs):
        if isinstance(out, (list, tuple)) and out and isinstance(out[-1], torch.Tensor):
            out = out[-1]  # mmpretrain ViTs of older layouts: (patch tokens, cls token)
        if not isinstance(out, torch.Tensor) or out.dim() not in (2, 4):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f'backbone {name}: output {i} is {shape}; only feature maps '
                             '(B, C, H, W) and pooled features (B, C) can be swapped')
        channels.append(int(out.shape[1]))
        if out.dim() == 2:
            strides.append(None)
        else:
            strides.append(2 ** round(math.log2(size / out.shape[-2])))
    return BackboneOutputs(name, channels, strides), backbone


def map_outputs(outputs: BackboneOutputs) -> Tuple[List[int], List[str]]:
    """The EVT stage for each original output, and notes for the user.

    Rule: an output of stride s goes to the EVT stage of stride s (4, 8, 16, 32 -> 0..3).
    An output whose stride is not larger than the previous one's (dilation) goes to the
    stage after the previous output's. A pooled output goes to the last stage. Strides
    outside 4..32 are an error.
    """
    stages, notes, dilated = [], [], []
    for i, s in enumerate(outputs.strides):
        if s is None:
            stage = len(EVT_STRIDES) - 1
        elif stages and outputs.strides[i - 1] is not None and s <= outputs.strides[i - 1]:
            stage = stages[-1] + 1
            dilated.append(i)
        elif s in EVT_STRIDES:
            stage = EVT_STRIDES.index(s)
        else:
            raise ValueError(f'backbone {outputs.type}: output {i} has stride {s}; EVT has '
                             f'strides {list(EVT_STRIDES)}')
        if stage >= len(EVT_STRIDES) or (stages and stage <= stages[-1]):
            raise ValueError(f'backbone {outputs.type}: outputs {outputs.describe()} do not '
                             f'map one-to-one onto EVT stages of strides {list(EVT_STRIDES)}')
        stages.append(stage)
    if dilated:
        notes.append(f'{outputs.type} is dilated (strides {outputs.strides}): EVT has no '
                     f'dilation, so its outputs {dilated} come from the next EVT stages '
                     f'(strides {[EVT_STRIDES[stages[i]] for i in dilated]}); the heads '
                     'resize their inputs')
    if None in outputs.strides:
        notes.append(f'{outputs.type} returns pooled features: EVT returns maps, which a '
                     'GlobalAveragePooling neck pools')
    return stages, notes


# ---------------------------------------------------------------------------- consumers
def _as_list(value: Any) -> List[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def remap_channels(cfg: dict, where: str, outputs: BackboneOutputs, stages: List[int],
                   dims: Sequence[int]) -> Dict[str, Any]:
    """New input-channel values of one consumer config ``cfg`` (at ``where``).

    ``in_channels`` is read through ``in_index`` when the module has one (mmseg's decode
    heads), else as one entry per backbone output (a list) or the last output (an int:
    mmdet's CTResNetNeck, mmpretrain's heads); ``c1_in_channels`` (mmseg's
    DepthwiseSeparableASPPHead) reads the first output. Every old value must equal the
    measured channels of the output it reads.
    """
    n = len(outputs.channels)
    new: Dict[str, Any] = {}
    kind = cfg.get('type', '?')

    def read(key: str, value: Any, index: List[int]) -> Any:
        olds = _as_list(value)
        if len(olds) != len(index):
            raise ValueError(f'{where} ({kind}): {key}={value!r} has {len(olds)} entries, '
                             f'but it reads backbone outputs {index}')
        for old, i in zip(olds, index):
            if old != outputs.channels[i]:
                raise ValueError(f'{where} ({kind}): {key}={value!r} does not match the '
                                 f'backbone outputs it reads ({outputs.describe()}); '
                                 'cannot tell which outputs it consumes')
        vals = [dims[stages[i]] for i in index]
        return vals if isinstance(value, (list, tuple)) else vals[0]

    if 'in_channels' in cfg:
        value = cfg['in_channels']
        if 'in_index' in cfg:
            index = [i % n for i in _as_list(cfg['in_index'])]
        elif isinstance(value, (list, tuple)):
            index = list(range(n))
        else:
            index = [n - 1]
        new['in_channels'] = read('in_channels', value, index)
    if 'c1_in_channels' in cfg:
        new['c1_in_channels'] = read('c1_in_channels', cfg['c1_in_channels'], [0])
    if not new:
        raise ValueError(f'{where} ({kind}) reads the backbone but has no '
                         f'{" / ".join(CHANNEL_KEYS)} to remap; this consumer is not '
                         'supported')
    return new


def _nested_consumers(cfg: dict, path: Tuple[Any, ...]) -> List[Tuple[Tuple[Any, ...], dict]]:
    """Dicts inside a head config that read the backbone: those with an ``in_index``."""
    found = []
    for key, value in cfg.items():
        for j, item in enumerate(_as_list(value)):
            if isinstance(item, dict):
                sub = path + ((key, ) if not isinstance(value, (list, tuple)) else (key, j))
                if 'in_index' in item and 'in_channels' in item:
                    found.append((sub, item))
                else:
                    found.extend(_nested_consumers(item, sub))
    return found


def _path_str(path: Tuple[Any, ...]) -> str:
    return 'model.' + '.'.join(str(p) for p in path)


def find_consumers(model_cfg: dict) -> Tuple[List[Tuple[Tuple[Any, ...], dict]], List[str]]:
    """The modules of ``model_cfg`` that read the backbone's outputs, as (path, cfg).

    The toolkits feed the backbone's outputs to the neck when there is one
    (``extract_feat``); a neck without channel arguments only pools and passes them on to
    the head. Without a neck every head reads the backbone; a head without
    ``in_channels`` is searched for nested heads with an ``in_index`` (KNet's
    ``kernel_generate_head``).
    """
    notes: List[str] = []
    neck = model_cfg.get('neck')
    if isinstance(neck, (list, tuple)):
        raise ValueError(f'model.neck is a list of {len(neck)} necks; only a single neck '
                         'is supported')
    if neck:
        if any(k in neck for k in CHANNEL_KEYS):
            return [(('neck', ), neck)], notes
        notes.append(f"neck {neck.get('type')} has no channel arguments: it passes the "
                     'backbone channels on to the head')
    roi = model_cfg.get('roi_head')
    if not neck and isinstance(roi, dict) and roi.get('shared_head'):
        raise ValueError(f"model.roi_head.shared_head ({roi['shared_head'].get('type')}) "
                         'runs a backbone stage inside the RoI head (a C4 detector); it '
                         'cannot be swapped: use an FPN config of the same detector')
    found = []
    for key in HEAD_KEYS:
        head = model_cfg.get(key)
        if not head:
            continue
        for j, item in enumerate(_as_list(head)):
            path = (key, ) if not isinstance(head, (list, tuple)) else (key, j)
            if any(k in item for k in CHANNEL_KEYS):
                found.append((path, item))
            else:
                nested = _nested_consumers(item, path)
                if not nested:
                    raise ValueError(f'{_path_str(path)} ({item.get("type")}) has no '
                                     'in_channels and no nested head with in_index; cannot '
                                     'find what reads the backbone')
                found.extend(nested)
    if not found:
        raise ValueError(f'{model_cfg.get("type")}: no neck and no head reads the backbone '
                         f'(looked for neck and {list(HEAD_KEYS)})')
    return found, notes


# ---------------------------------------------------------------------------- recipe
def recipe_family(model_cfg: dict, toolkit: str) -> Optional[str]:
    """Which of our families' recipes fits ``model_cfg``; None for query-based models.

    mmdet: a cascade RoI head -> ``cascade``, another RoI head -> ``mask_rcnn`` (two-stage
    detectors), no RoI head -> ``retinanet`` (dense one-stage heads); mmseg: an FPN neck ->
    ``sem_fpn``, else ``upernet`` (heads on the backbone's maps); mmpretrain -> ``cls``.
    """
    if toolkit == 'mmpretrain':
        return 'cls'
    heads = [h for k in HEAD_KEYS for h in _as_list(model_cfg.get(k)) if isinstance(h, dict)]
    if (model_cfg.get('type') in QUERY_BASED_MODELS
            or any(h.get('type') in QUERY_BASED_HEADS for h in heads)):
        return None
    if toolkit == 'mmdet':
        roi = model_cfg.get('roi_head')
        if not roi:
            return 'retinanet'
        return 'cascade' if roi.get('type') == 'CascadeRoIHead' else 'mask_rcnn'
    neck = model_cfg.get('neck')
    return 'sem_fpn' if neck and neck.get('type') == 'FPN' else 'upernet'


def family_config(family: str, arch: str) -> Tuple[str, bool]:
    """Path of our config of ``family`` for ``arch``, and whether it is that arch's (else
    the family's shared recipe, the ``evt-t`` config)."""
    from .hub import mim_root
    root = mim_root()
    if root is None:
        raise FileNotFoundError('mmevt configs not found (neither a wheel with .mim/configs '
                                'nor a source checkout); --recipe evt needs them')
    for name, own in ((_canonical_arch(arch), True), (SHARED_RECIPE_ARCH, False)):
        hits = sorted(glob.glob(osp.join(root, 'configs',
                                         FAMILY_CONFIGS[family].format(arch=name))))
        hits = [h for h in hits if '384px' not in h and '_test-' not in h]
        if hits:
            return hits[0], own
    raise FileNotFoundError(f'no config of family {family!r} under {root}/configs')


def _with_scope(cfg: Any, toolkit: str) -> Any:
    """Pin the toolkit's scope on each dict with a ``type`` at the top of ``cfg``."""
    if isinstance(cfg, dict):
        cfg = dict(cfg)
        cfg.pop('_scope_', None)
        return dict(_scope_=toolkit, **cfg) if 'type' in cfg else cfg
    if isinstance(cfg, list):
        return [_with_scope(c, toolkit) for c in cfg]
    return cfg


def apply_recipe(plan: SwapPlan, src_cfg, recipe: str) -> None:
    """Fill the backbone's drop path / norm and the optimizer overrides into ``plan``."""
    arch_drop = resolve_arch(plan.arch)['drop_path_rate']
    if recipe == 'keep':
        plan.recipe_note = 'the optimizer and schedule of SRC (--recipe keep)'
        return
    family = recipe_family(src_cfg.model, plan.toolkit)
    if family is None:
        plan.recipe_note = (f'{src_cfg.model.get("type")} is query-based: none of our '
                            'families matches, so its own AdamW recipe (lr tuned for its '
                            'decoder, backbone lr x0.1) is kept')
        path, _ = family_config('mask_rcnn' if plan.toolkit == 'mmdet' else 'upernet',
                                plan.arch)
        ours = load_src(path)
        norm = ours.model.backbone.get('norm_cfg')
        if norm:
            plan.backbone['norm_cfg'] = (_plain(norm), f'as our {osp.basename(path)}')
        plan.backbone['drop_path_rate'] = (arch_drop, f"{plan.arch}'s ImageNet value")
        return
    path, own = family_config(family, plan.arch)
    ours = load_src(path)
    src_name = osp.basename(path)
    if not own:
        plan.notes.append(f'no {family} config of ours for {plan.arch}: the recipe is the '
                          f"family's shared one ({src_name})")
    ob = ours.model.backbone
    drop = ob.get('drop_path_rate') if own and ob.get('drop_path_rate') is not None \
        else arch_drop
    plan.backbone['drop_path_rate'] = (drop, f'{plan.arch}: as our {src_name}' if own
                                       else f"{plan.arch}'s ImageNet value")
    if ob.get('norm_cfg'):
        plan.backbone['norm_cfg'] = (_plain(ob.norm_cfg), f'as our {src_name}')
    plan.recipe_note = f'the {family} family of ours ({src_name})'
    plan.top_level.append(('optim_wrapper',
                           dict(_delete_=True, **_with_scope(_plain(ours.optim_wrapper),
                                                             plan.toolkit)),
                           f'AdamW, lr, weight decay and no-decay rules of our {src_name}'))
    if plan.toolkit in ('mmseg', 'mmpretrain'):
        sched = _with_scope(_plain(ours.param_scheduler), plan.toolkit)
        why = f'the schedule of our {src_name}'
        max_iters = src_cfg.get('train_cfg', {}).get('max_iters')
        if plan.toolkit == 'mmseg' and max_iters and not sched[-1].get('by_epoch', True):
            sched[-1]['end'] = max_iters
            why += f", ending at SRC's max_iters ({max_iters})"
        why += (": SRC's SGD schedule does not fit AdamW (e.g. mmseg's poly decays to "
                '1e-4, above our lr)' if plan.toolkit == 'mmseg' else
                ": warm-up + cosine over SRC's epochs")
        plan.top_level.append(('param_scheduler', sched, why))
    if ours.get('auto_scale_lr'):
        plan.top_level.append(('auto_scale_lr', _plain(ours.auto_scale_lr),
                               f'the batch our lr is for ({src_name}); --auto-scale-lr '
                               'scales it'))
    if ours.get('sync_bn'):
        plan.top_level.append(('sync_bn', ours.sync_bn, f'as our {src_name}'))


# ---------------------------------------------------------------------------- plan
def plan_swap(src: str, arch: str, pretrained: Optional[str] = None,
              recipe: str = 'evt') -> Tuple[SwapPlan, Any, Any]:
    """Measure SRC's backbone, map it onto ``arch`` and find what to override.

    Returns:
        tuple: the :class:`SwapPlan`, SRC's config and its built original backbone.
    """
    if recipe not in ('evt', 'keep'):
        raise ValueError(f"--recipe must be 'evt' or 'keep', got {recipe!r}")
    arch = _canonical_arch(arch)
    cfg = load_src(src)
    toolkit = config_toolkit(cfg, src)
    model = cfg.get('model')
    if not isinstance(model, dict) or not isinstance(model.get('backbone'), dict):
        raise ValueError(f'{src}: model.backbone is missing; nothing to swap')
    outputs, original = measure_backbone(model.backbone, toolkit)
    stages, notes = map_outputs(outputs)
    dims = resolve_arch(arch)['embed_dims']
    backbone: Dict[str, Any] = dict(
        _delete_=(True, None), _scope_=(toolkit, None), type=('EVT', None),
        arch=(arch, None),
        out_indices=(tuple(stages), f'the stages of strides '
                     f'{[EVT_STRIDES[s] for s in stages]}, for {outputs.type}\'s outputs '
                     f'{outputs.describe()}'))
    plan = SwapPlan(src, arch, toolkit, outputs, stages, backbone, notes=notes)
    consumers, cnotes = find_consumers(model)
    plan.notes.extend(cnotes)
    for path, ccfg in consumers:
        where = _path_str(path)
        new = remap_channels(ccfg, where, outputs, stages, dims)
        olds = {k: ccfg[k] for k in new}
        plan.overrides.append(Override(path, new, f'{ccfg.get("type")} reads the backbone: '
                                       f'{olds} -> {arch}\'s channels'))
    if None in outputs.strides:
        neck = model.get('neck')
        if not neck:
            # a `neck=None` of the base cannot be merged into: replace it
            gap = dict(_delete_=True) if 'neck' in model else {}
            plan.overrides.append(Override(('neck', ), dict(gap, type='GlobalAveragePooling'),
                                           f'the head takes pooled features ({outputs.type} '
                                           'pools them itself); EVT returns maps'))
        elif any(k in neck for k in CHANNEL_KEYS):
            raise ValueError(f'model.neck ({neck.get("type")}) takes pooled features of '
                             f'{outputs.type}; EVT returns maps: not supported')
    if model.get('pretrained'):
        plan.overrides.append(Override((), dict(pretrained=None),
                                       f"SRC's model.pretrained ({model.pretrained}) is its "
                                       'original backbone\'s weights'))
    if pretrained:
        backbone['init_cfg'] = (dict(type='Pretrained', checkpoint=pretrained,
                                     prefix='backbone.'),
                                'an mmevt classifier checkpoint (keys under backbone.)')
    _normalisation(plan, cfg)
    apply_recipe(plan, cfg, recipe)
    return plan, cfg, original


def _normalisation(plan: SwapPlan, cfg) -> None:
    """Use ImageNet RGB normalisation (EVT's classification configs') where SRC differs."""
    top = not cfg.model.get('data_preprocessor')  # mmpretrain keeps it at the top level
    dp = cfg.get('data_preprocessor') if top else cfg.model.data_preprocessor
    if not isinstance(dp, dict) or 'mean' not in dp:
        return
    rgb_key = 'to_rgb' if plan.toolkit == 'mmpretrain' else 'bgr_to_rgb'
    same = ([float(v) for v in dp['mean']] == IMAGENET_MEAN
            and [float(v) for v in dp.get('std', [])] == IMAGENET_STD
            and dp.get(rgb_key, False))
    if same:
        return
    values = {'mean': IMAGENET_MEAN, 'std': IMAGENET_STD, rgb_key: True}
    why = (f"EVT's ImageNet weights expect RGB with ImageNet mean / std; SRC normalises "
           f"with mean {list(dp['mean'])}, std {list(dp.get('std', []))}")
    if top:
        plan.top_level.append(('data_preprocessor', values, why))
    else:
        plan.overrides.append(Override(('data_preprocessor', ), values, why))


# ---------------------------------------------------------------------------- render
_IDENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def _fmt(value: Any, indent: int = 0, used: int = 0, width: int = 95) -> str:
    """Python source of ``value`` (dicts as ``dict(...)`` where keys allow), wrapped at
    ``width``: ``indent`` is the current line's indentation, ``used`` its columns taken."""
    def inline(v: Any) -> str:
        if isinstance(v, dict):
            if all(isinstance(k, str) and _IDENT.match(k) for k in v):
                return 'dict(' + ', '.join(f'{k}={inline(x)}' for k, x in v.items()) + ')'
            return '{' + ', '.join(f'{k!r}: {inline(x)}' for k, x in v.items()) + '}'
        if isinstance(v, list):
            return '[' + ', '.join(inline(x) for x in v) + ']'
        if isinstance(v, tuple):
            return '(' + ', '.join(inline(x) for x in v) + (',)' if len(v) == 1 else ')')
        return repr(v)

    one = inline(value)
    if used + len(one) <= width or not isinstance(value, (dict, list)) or not value:
        return one
    pad = ' ' * (indent + 4)
    if isinstance(value, list):
        body = [pad + _fmt(x, indent + 4, indent + 4, width) for x in value]
        opening, closing = '[', ']'
    elif all(isinstance(k, str) and _IDENT.match(k) for k in value):
        body = [f'{pad}{k}=' + _fmt(x, indent + 4, indent + 5 + len(k), width)
                for k, x in value.items()]
        opening, closing = 'dict(', ')'
    else:
        body = [f'{pad}{k!r}: ' + _fmt(x, indent + 4, indent + 6 + len(k), width)
                for k, x in value.items()]
        opening, closing = '{', '}'
    return opening + '\n' + ',\n'.join(body) + ',\n' + ' ' * indent + closing


def _nest(path: Tuple[Any, ...], values: Dict[str, Any], base_model: dict,
          existing: Any = None) -> Tuple[str, Any]:
    """The top key under ``model`` and its value for an override at ``path``; a list
    element (heads given as a list) is written as the whole list with that element
    changed (into ``existing``, the list written so far, if any), since a config cannot
    override one element of a list."""
    if not path:
        raise AssertionError('model-level overrides are merged by the caller')
    key, rest = path[0], path[1:]
    if rest and isinstance(rest[0], int):
        items = existing if isinstance(existing, list) else [
            copy.deepcopy(_plain(x)) for x in base_model[key]]
        target = items[rest[0]]
        for p in rest[1:]:
            target = target[p]
        target.update(values)
        return key, items
    value: Any = dict(values)
    for p in reversed(rest):
        value = {p: value}
    return key, value


def _comment(text: str, indent: int = 0, width: int = 95) -> List[str]:
    """``text`` as comment lines of at most ``width`` columns (long words stay whole)."""
    pad = ' ' * indent + '# '
    return textwrap.wrap(text, width, initial_indent=pad, subsequent_indent=pad + '  ',
                         break_long_words=False, break_on_hyphens=False)


def render(plan: SwapPlan, src_cfg, command: str, base: Optional[str] = None) -> str:
    """The text of DST; ``base`` is its ``_base_`` (defaults to ``plan.src``)."""
    lines = _comment(f'{plan.src} with an {plan.arch} (EVT) backbone instead of '
                     f'{plan.outputs.type}.')
    lines += _comment(f'Written by: {command}')
    lines += _comment(f'{plan.outputs.type} outputs (channels@stride, measured): '
                      f'{plan.outputs.describe()}.')
    lines += _comment(f'Recipe: {plan.recipe_note}.')
    for note in plan.notes:
        lines += _comment(f'Note: {note}.')
    lines += [f'_base_ = {base or plan.src!r}',
              "# the toolkit's own tools/train.py imports mmevt, which registers EVT",
              "custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)",
              '']
    lines.append('model = dict(')
    bb = {k: v for k, (v, _) in plan.backbone.items()}
    why = [f'{k}: {w}' for k, (_, w) in plan.backbone.items() if w]
    lines += _comment(f'{plan.outputs.type} -> EVT {plan.arch}; ' + '; '.join(why), 4)
    lines.append('    backbone=' + _fmt(bb, 4, 13) + ',')
    merged: Dict[str, Tuple[Any, List[str]]] = {}
    for o in plan.overrides:
        if not o.path:
            for k, v in o.values.items():
                merged[k] = (v, [o.why])
            continue
        key = o.path[0]
        key, value = _nest(o.path, o.values, src_cfg.model, merged.get(key, (None, ))[0])
        if key in merged and isinstance(value, list):
            merged[key][1].append(o.why)  # the same list, changed in place
        elif key in merged and isinstance(value, dict) and isinstance(merged[key][0], dict):
            old, whys = merged[key]
            _deep_update(old, value)
            whys.append(o.why)
        else:
            merged[key] = (value, [o.why])
    for key, (value, whys) in merged.items():
        for w in whys:
            lines += _comment(f'{key}: {w}', 4)
        lines.append(f'    {key}=' + _fmt(value, 4, 5 + len(key)) + ',')
    lines.append(')')
    for key, value, w in plan.top_level:
        lines += [''] + _comment(w) + [f'{key} = ' + _fmt(value, 0, len(key) + 3)]
    return '\n'.join(lines) + '\n'


def _deep_update(dst: dict, src: dict) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_update(dst[k], v)
        else:
            dst[k] = v


def swap_config(src: str, arch: str, out: str, pretrained: Optional[str] = None,
                recipe: str = 'evt', overwrite: bool = False,
                command: Optional[str] = None,
                log: Callable[[str], None] = print) -> Tuple[SwapPlan, Any, Any]:
    """Write DST (``out``) for ``src`` with ``arch``; refuses to replace an existing file
    unless ``overwrite``. Returns what :func:`plan_swap` returns."""
    if osp.exists(out) and not overwrite:
        raise FileExistsError(f'{out} exists; pass --overwrite to replace it')
    if not out.endswith('.py'):
        raise ValueError(f'--out must be a .py config file, got {out!r}')
    plan, cfg, original = plan_swap(src, arch, pretrained, recipe)
    command = command or (f'mmevt-swap {src} --arch {plan.arch} --out {out} --recipe {recipe}'
                          + (f' --pretrained {pretrained}' if pretrained else ''))
    # mmengine resolves a relative `_base_` from DST's folder
    base = src if '::' in src else osp.relpath(osp.abspath(src), osp.dirname(osp.abspath(out)))
    text = render(plan, cfg, command, base)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        f.write(text)
    for n in plan.notes:
        log(f'note: {n}')
    log(f'wrote {out}: {plan.outputs.type} {plan.outputs.describe()} -> {plan.arch} '
        f'stages {list(plan.stages)}; remapped '
        + (', '.join(_path_str(o.path) for o in plan.overrides if o.path) or 'nothing'))
    return plan, cfg, original


# ---------------------------------------------------------------------------- check
def _query_tokens_size(model_cfg: dict, stages: Sequence[int]) -> int:
    """Smallest square side (multiple of 32) giving a two-stage query detector (DINO,
    two-stage Deformable DETR) at least as many encoder tokens as it selects queries."""
    two_stage = model_cfg.get('as_two_stage') or model_cfg.get('type') in ('DINO', 'DDQDETR')
    queries = model_cfg.get('num_queries')
    if not two_stage or not queries:
        return 0
    strides = [EVT_STRIDES[s] for s in stages]
    extra = (model_cfg.get('neck') or {}).get('num_outs', len(strides)) - len(strides)
    strides += [strides[-1] * 2 ** (k + 1) for k in range(max(extra, 0))]
    side = 32
    while sum(math.ceil(side / s) ** 2 for s in strides) < queries:
        side += 32
    return side


def check_size(model_cfg: dict, stages: Sequence[int]) -> int:
    """A square input side the swapped model accepts: 64 (EVT's four stride-2 levels need
    32; 64 leaves the stride-32 map 2 x 2), more for two-stage query detectors."""
    return max(64, _query_tokens_size(model_cfg, stages))


def _num_classes(model_cfg: dict) -> int:
    found = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ('num_classes', 'num_things_classes') and isinstance(x, int) and x > 0:
                    found.append(x)
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
    walk(model_cfg)
    return min(found) if found else 3


def _annotations(cfg) -> Dict[str, bool]:
    """Which annotations the config's training pipeline loads (masks, semantic maps), read
    from its ``LoadAnnotations`` / ``LoadPanopticAnnotations`` step (heads that do not
    train on masks may break on them, e.g. RTMDet's assigner)."""
    found = dict(with_mask=False, with_seg=False)

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            kind = v.get('type')
            if kind == 'LoadPanopticAnnotations':
                found['with_mask'] |= v.get('with_mask', True)
                found['with_seg'] |= v.get('with_seg', True)
            elif kind == 'LoadAnnotations':
                found['with_mask'] |= bool(v.get('with_mask', False))
                found['with_seg'] |= bool(v.get('with_seg', False))
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
    walk(_plain(cfg.get('train_dataloader', {})))
    return found


def make_batch(toolkit: str, model_cfg: dict, size: int, batch: int = 2,
               annotations: Optional[Dict[str, bool]] = None) -> dict:
    """A generated batch as the toolkit's dataloader gives it: uint8 images, annotations
    drawn at random (at most 3 classes, valid for any head); for mmdet the masks /
    semantic maps that ``annotations`` (:func:`_annotations`) names."""
    import torch
    gen = torch.Generator().manual_seed(0)
    classes = min(3, _num_classes(model_cfg))
    inputs = [torch.randint(0, 256, (3, size, size), generator=gen, dtype=torch.uint8)
              for _ in range(batch)]
    if toolkit == 'mmdet':
        from mmdet.testing import demo_mm_inputs
        ann = annotations or {}
        data = demo_mm_inputs(batch, [(3, size, size)] * batch, num_items=[3] * batch,
                              num_classes=classes, with_mask=ann.get('with_mask', False),
                              with_semantic=ann.get('with_seg', False))
        data['inputs'] = inputs
        return data
    if toolkit == 'mmseg':
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample
        samples = []
        for _ in range(batch):
            s = SegDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size),
                                            pad_shape=(size, size)))
            s.gt_sem_seg = PixelData(data=torch.randint(0, classes, (1, size, size),
                                                        generator=gen))
            samples.append(s)
        return dict(inputs=inputs, data_samples=samples)
    from mmpretrain.structures import DataSample
    samples = [DataSample(metainfo=dict(img_shape=(size, size))).set_gt_label(i % classes)
               for i in range(batch)]
    return dict(inputs=inputs, data_samples=samples)


def _model_cfg_for_check(cfg, toolkit: str, size: int) -> dict:
    """``cfg.model`` as the runner builds it, with the data preprocessor's batch
    augmentations (e.g. LSJ's fixed 1024 pad) off and mmseg's pad size at ``size``."""
    model = _plain(cfg.model)
    if cfg.get('data_preprocessor') and 'data_preprocessor' not in model:
        model['data_preprocessor'] = _plain(cfg.data_preprocessor)
    dp = model.get('data_preprocessor')
    if isinstance(dp, dict):
        dp.pop('batch_augments', None)
        if toolkit == 'mmseg' and dp.get('size'):
            dp['size'] = (size, size)
    if isinstance(model.get('backbone'), dict):
        model['backbone'].pop('init_cfg', None)  # no checkpoint needed for the check
    return model


@contextlib.contextmanager
def _quiet_logger(level: int = logging.WARNING):
    """mmengine's current logger at ``level`` (the optimizer constructor logs every
    parameter's options at INFO)."""
    from mmengine.logging import MMLogger
    logger = MMLogger.get_current_instance()
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def complexity(module, size: int) -> Tuple[int, Optional[int]]:
    """Params and FLOPs (multiply-adds, mmengine's counter) of a backbone at
    ``size x size``; FLOPs None where the counter fails on the module."""
    from mmengine.analysis import get_model_complexity_info
    params = sum(p.numel() for p in module.parameters())
    try:
        with _quiet_logger(logging.ERROR):  # it warns of each module the trace did not call
            info = get_model_complexity_info(module, input_shape=(3, size, size),
                                             show_table=False, show_arch=False)
        return params, int(info['flops'])
    except Exception:  # a counter failure must not hide the check's result
        return params, None


@dataclass
class CheckResult:
    """What :func:`check_config` measured."""
    size: int
    loss: float
    backbone_grad_norm: float
    num_predictions: int
    seconds: float
    params: Optional[int] = None
    backbone_flops: Optional[int] = None


def check_config(dst: str, size: Optional[int] = None, stages: Sequence[int] = (0, 1, 2, 3),
                 flops: bool = True, log: Callable[[str], None] = print) -> CheckResult:
    """Build ``dst`` as a runner does, run one training step (finite loss, non-zero
    gradients in the backbone, optimizer step) and one prediction on a generated batch.

    Args:
        dst (str): the swapped config.
        size (int, optional): input side; defaults to :func:`check_size`.
        stages (Sequence[int]): EVT stages the model reads (for :func:`check_size`).
        flops (bool): also count the EVT backbone's params / FLOPs. Defaults to True.
    """
    import torch
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    start = time.perf_counter()
    import mmevt  # noqa: F401
    cfg = Config.fromfile(dst)
    toolkit = config_toolkit(cfg, dst)
    size = size or check_size(cfg.model, stages)
    model_cfg = _model_cfg_for_check(cfg, toolkit, size)
    torch.manual_seed(0)
    model = _build(toolkit, model_cfg)
    with _quiet_logger():
        model.init_weights()  # as the runner does (e.g. Sparse R-CNN's small box deltas)
    optim_cfg = _plain(cfg.optim_wrapper)
    if optim_cfg.get('type') == 'AmpOptimWrapper' and not torch.cuda.is_available():
        optim_cfg['type'] = 'OptimWrapper'  # mmengine's AMP wrapper needs a GPU
        optim_cfg.pop('loss_scale', None)
    batch = make_batch(toolkit, model_cfg, size, annotations=_annotations(cfg))
    with _scoped(toolkit), _quiet_logger():
        optim = build_optim_wrapper(model, optim_cfg)
        model.train()
        # A head initialised to zero (mmpretrain's ViT head, by its init_cfg) passes no
        # gradient to the backbone in the first step: then a second step must.
        for step in range(2):
            data = model.data_preprocessor(copy.deepcopy(batch), True)
            loss, _ = model.parse_losses(model(**data, mode='loss'))
            if not torch.isfinite(loss):
                raise ValueError(f'{dst}: the training loss is {loss.item()} on a generated '
                                 'batch')
            optim.backward(loss)
            grads = [p.grad.norm() for p in model.backbone.parameters() if p.grad is not None]
            grad_norm = float(torch.stack(grads).norm()) if grads else 0.
            optim.step()
            optim.zero_grad()
            if grad_norm > 0:
                break
        if not grad_norm > 0 or not math.isfinite(grad_norm):
            raise ValueError(f'{dst}: the backbone gets no (finite) gradient in {step + 1} '
                             f'training steps: norm {grad_norm}')
        model.eval()
        with torch.no_grad():
            data = model.data_preprocessor(copy.deepcopy(batch), False)
            preds = model(**data, mode='predict')
    if len(preds) != len(batch['inputs']):
        raise ValueError(f'{dst}: {len(preds)} predictions for {len(batch["inputs"])} images')
    result = CheckResult(size, float(loss.detach()), grad_norm, len(preds),
                         time.perf_counter() - start)
    if flops:
        result.params = sum(p.numel() for p in model.parameters())
        _, result.backbone_flops = complexity(model.backbone.eval(), size)
    log(f'check: {size} x {size} batch of {len(preds)}: loss {result.loss:.4g}, backbone '
        f'gradient norm {grad_norm:.3g}, {len(preds)} predictions ({result.seconds:.1f} s)')
    return result


def _fmt_count(n: Optional[int]) -> str:
    return 'n/a' if n is None else f'{n / 1e6:.2f} M'


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog='mmevt-swap', description='Write a config that inherits SRC with EVT as its '
        'backbone (the consumers of the backbone remapped, our recipe), optionally check it.')
    parser.add_argument('src', help="config file, or a 'mmdet::' / 'mmseg::' / "
                        "'mmpretrain::' path")
    parser.add_argument('--arch', required=True,
                        help='EVT arch, e.g. evt-t, evt-s, evt-swin-t')
    parser.add_argument('--out', required=True, help='the config to write (DST, .py)')
    parser.add_argument('--pretrained', help='backbone checkpoint (init_cfg); keys under '
                        "'backbone.' as in an mmevt classifier checkpoint")
    parser.add_argument('--recipe', default='evt', choices=('evt', 'keep'),
                        help="'evt': our family's optimizer, drop path and SyncBN; 'keep': "
                        "SRC's optimizer (default: evt)")
    parser.add_argument('--check', action='store_true', help='build DST, run one training '
                        'step and one prediction on a generated batch, print params / FLOPs')
    parser.add_argument('--overwrite', action='store_true', help='replace an existing DST')
    args = parser.parse_args(argv)
    command = 'mmevt-swap ' + ' '.join(sys.argv[1:] if argv is None else argv)
    plan, cfg, original = swap_config(args.src, args.arch, args.out, args.pretrained,
                                      args.recipe, args.overwrite, command)
    if not args.check:
        return
    result = check_config(args.out, stages=plan.stages)
    before_params = sum(p.numel() for p in _build(plan.toolkit,
                                                  _model_cfg_for_check(cfg, plan.toolkit,
                                                                       result.size))
                        .parameters())
    _, before_flops = complexity(original, result.size)
    print(f'params (whole model): {_fmt_count(before_params)} -> {_fmt_count(result.params)}')
    print(f'backbone FLOPs at {result.size} x {result.size}: {_fmt_count(before_flops)} -> '
          f'{_fmt_count(result.backbone_flops)} (multiply-adds, mmengine)')


def cli(argv: Optional[List[str]] = None) -> None:
    """:func:`main` with user errors as a one-line message and exit status 1."""
    try:
        main(argv)
    except (ValueError, FileExistsError, FileNotFoundError) as err:
        sys.exit(f'mmevt-swap: error: {err}')
