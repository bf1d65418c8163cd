"""Key mapping between the authors' public RMT checkpoints and mmevt's layouts.

Three layouts of the authors' files are read (see ``docs/checkpoints.md``):

- ImageNet classifiers saved by their DeiT-style ``main.py``: ``{'model', 'model_ema',
  'optimizer', 'lr_scheduler', 'scaler', 'epoch', 'args': argparse.Namespace, ...}`` with
  keys ``patch_embed.proj.N``, ``layers.i.*``, ``proj``, ``norm``, ``head``
  (``classfication_release/RMT.py`` and ``main.py`` in github.com/qhfan/RMT);
- token-labelled classifiers (``classification_token_label_release/RMT.py``): the same plus
  ``aux_head``, a linear layer on every token of the last stage;
- COCO / ADE20K models in mmdet 2.x / mmseg 0.x layout (``detect/mmdet/models/backbones/
  RMT.py``): ``backbone.`` + the classifier's backbone keys, ``backbone.extra_norms.i``
  (``nn.LayerNorm``, eps 1e-5, on each stage output) and the heads under their toolkit
  names, which mmdet 3.x / mmseg 1.x kept.

Every layout stores per-stage ``Relpos.decay`` / ``Relpos.angle`` buffers; mmevt recomputes
them, so they are checked against the arch and dropped.
"""
import argparse
import pickle
import re
from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch
from torch import Tensor

from .checkpoint import unwrap_state_dict

# Authors' stem is one nn.Sequential: conv/BN pairs at 0-1, 3-4, 6-7, 9-10 (GELUs between).
_STEM = {'0': '0.conv', '1': '0.norm', '3': '1.conv', '4': '1.norm', '6': '2.conv',
         '7': '2.norm', '9': '3.conv', '10': '3.norm'}
_BLOCK = [
    ('pos.conv.', 'cpe.conv.'),
    ('retention_layer_norm.', 'norm1.'),
    ('retention.q_proj.', 'attn.q.'),
    ('retention.k_proj.', 'attn.k.'),
    ('retention.v_proj.', 'attn.v.'),
    ('retention.out_proj.', 'attn.proj.'),
    ('retention.lepe.conv.', 'attn.lepe.conv.'),
    ('final_layer_norm.', 'norm2.'),
    ('ffn.fc1.', 'ffn.fc1.'),
    ('ffn.fc2.', 'ffn.fc2.'),
    ('ffn.dwconv.conv.', 'ffn.dwconv.conv.'),
]
# ``aux_head`` (token labelling) -> RMTTokenLabelClsHead's ``aux_fc``
_HEAD = [('proj.', 'neck.proj.'), ('norm.', 'neck.norm.'), ('head.', 'head.fc.'),
         ('aux_head.', 'head.aux_fc.')]

WEIGHTS = ('model', 'model_ema')
# The weights behind the authors' README top-1 for each arch: their logs' best plain / EMA
# top-1 are RMT-T 82.41 / 82.33 (README 82.4) and, for S/B/L, the EMA's equal the README's
# 84.1 / 85.0 / 85.5. Token-labelled S*/B*/L* files are read the same way (EMA).
README_WEIGHTS = {'rmt-t': 'model', 'rmt-s': 'model_ema', 'rmt-b': 'model_ema',
                  'rmt-l': 'model_ema'}
# The authors' README top-1 (ImageNet-1k val, 224): plain and token-labelled (*) models.
README_TOP1 = {'rmt-t': 82.4, 'rmt-s': 84.1, 'rmt-b': 85.0, 'rmt-l': 85.5}
README_TOP1_TOKEN_LABEL = {'rmt-s': 84.8, 'rmt-b': 85.6, 'rmt-l': 86.1}
# What the authors' training scripts pickle besides tensors and builtins: ``args``.
AUTHORS_SAFE_GLOBALS: List[Any] = [argparse.Namespace]
# The authors' det/seg output norms are nn.LayerNorm with its default eps.
AUTHORS_OUT_NORM_EPS = 1e-5


class UntrustedCheckpointError(ValueError):
    """A checkpoint pickles an object outside the allow-list (``weights_only`` refused it)."""


def load_authors_checkpoint(path: str, trust: bool = False) -> Any:
    """Load one of the authors' files with ``weights_only=True``.

    ``argparse.Namespace`` (their ``args``) is allowed for this load only, on top of the
    process-wide OpenMMLab allow-list that ``import mmevt`` installs (numpy scalars and
    arrays found in mmcv/mmengine metadata).

    Args:
        path (str): the checkpoint.
        trust (bool): unpickle with ``weights_only=False``, which runs whatever code the
            file pickles. Only for files from a source you trust. Defaults to False.

    Returns:
        The unpickled object.

    Raises:
        UntrustedCheckpointError: the file pickles another global; the message names it.
    """
    if trust:
        return torch.load(path, map_location='cpu', weights_only=False)
    try:
        with torch.serialization.safe_globals(AUTHORS_SAFE_GLOBALS):
            return torch.load(path, map_location='cpu', weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r'GLOBAL (\S+)', str(err))
        what = found.group(1) if found else str(err).splitlines()[0]
        raise UntrustedCheckpointError(
            f'{path} pickles {what}, which a weights-only load refuses (allowed: tensors, '
            f'builtins, argparse.Namespace and OpenMMLab metadata). Only if you trust where '
            f'the file comes from, pass --trust-checkpoint: it unpickles with '
            f'weights_only=False, which can run arbitrary code.') from err


def detect_layout(state: Mapping[str, Tensor]) -> str:
    """``'cls'``, ``'cls_token_label'`` or ``'dense'`` (mmdet 2.x / mmseg 0.x model).

    Raises:
        ValueError: none of the authors' layouts.
    """
    if 'backbone.patch_embed.proj.0.weight' in state:
        return 'dense'
    if 'patch_embed.proj.0.weight' in state:
        return 'cls_token_label' if 'aux_head.weight' in state else 'cls'
    raise ValueError(f"not one of the authors' RMT layouts (no 'patch_embed.proj.0.weight' "
                     f"or 'backbone.patch_embed.proj.0.weight'); keys start with "
                     f'{sorted(state)[:5]}')


def select_weights(ckpt: Any, weights: Optional[str] = None, arch: Optional[str] = None
                   ) -> Tuple[Dict[str, Tensor], str, str]:
    """Pick the plain or EMA weights of an authors' ImageNet checkpoint.

    Args:
        ckpt: the loaded file: ``{'model': ..., 'model_ema': ..., ...}`` or a bare state dict.
        weights (str, optional): ``'model'`` or ``'model_ema'``. Defaults to None: the
            weights behind the authors' README number for ``arch``
            (:data:`README_WEIGHTS`), or the only ones the file holds.
        arch (str, optional): the detected arch (see :func:`detect_arch`). Defaults to None.

    Returns:
        tuple: ``(state_dict, which, why)`` where ``which`` names the weights taken
        (``'model'``, ``'model_ema'`` or ``'state_dict'`` for a bare file) and ``why`` says
        why, for the converter's output.

    Raises:
        ValueError: bad ``weights``, or weights the file does not hold, or no way to choose.
    """
    if weights is not None and weights not in WEIGHTS:
        raise ValueError(f'--weights must be one of {list(WEIGHTS)}, got {weights!r}')
    if not isinstance(ckpt, Mapping):
        raise ValueError(f'expected a dict checkpoint, got {type(ckpt).__name__}')
    held = [k for k in WEIGHTS if isinstance(ckpt.get(k), Mapping)]
    if not held:
        if weights is not None:
            raise ValueError(f'--weights {weights}: the file has no {weights!r} entry (it is '
                             f'a bare state dict or {{"state_dict": ...}}); drop --weights')
        return unwrap_state_dict(ckpt), 'state_dict', 'the file holds one set of weights'
    if weights is not None:
        if weights not in held:
            raise ValueError(f'--weights {weights}: the file has no {weights!r} entry; it '
                             f'holds {held}')
        return dict(ckpt[weights]), weights, 'chosen with --weights'
    if len(held) == 1:
        return dict(ckpt[held[0]]), held[0], f'the file holds only {held[0]!r}'
    if arch not in README_WEIGHTS:
        found = arch or "none of the authors' RMT-T/S/B/L"
        raise ValueError(f'the file holds both {list(WEIGHTS)} and its arch ({found}) has no '
                         f'README number to choose by; pass --weights model or --weights '
                         f'model_ema')
    which = README_WEIGHTS[arch]
    return (dict(ckpt[which]), which,
            f"the authors' README top-1 of {arch} is that of their "
            f"{'EMA' if which == 'model_ema' else 'plain (non-EMA)'} weights; "
            f'pass --weights to choose')


def _stage_blocks(state: Mapping[str, Tensor], prefix: str) -> List[int]:
    """Number of blocks of each stage in an authors' state dict."""
    depths = []
    while f'{prefix}layers.{len(depths)}.blocks.0.pos.conv.weight' in state:
        i, j = len(depths), 0
        while f'{prefix}layers.{i}.blocks.{j}.pos.conv.weight' in state:
            j += 1
        depths.append(j)
    return depths


def detect_arch(state: Mapping[str, Tensor], prefix: str = '') -> Optional[str]:
    """The mmevt ``arch_zoo`` name of an authors' RMT state dict, from its tensors.

    Widths, depths, FFN widths, layer-scale stages and (where stored) head counts are
    compared with every arch of the authors' RMT layout (``RMT_ARCHS``).

    Args:
        state (Mapping): authors' keys, under ``prefix``.
        prefix (str): ``'backbone.'`` for det/seg files. Defaults to ``''``.

    Returns:
        str | None: e.g. ``'rmt-s'``; None when no RMT arch matches.
    """
    from ..models.backbones.archs import RMT_ARCHS, resolve_arch
    depths = _stage_blocks(state, prefix)
    if not depths:
        return None
    dims = [state[f'{prefix}layers.{i}.blocks.0.pos.conv.weight'].shape[0]
            for i in range(len(depths))]
    hidden = [state[f'{prefix}layers.{i}.blocks.0.ffn.fc1.weight'].shape[0]
              for i in range(len(depths))]
    scaled = [f'{prefix}layers.{i}.blocks.0.gamma_1' in state for i in range(len(depths))]
    heads = [state[f'{prefix}layers.{i}.Relpos.decay'].numel()
             if f'{prefix}layers.{i}.Relpos.decay' in state else None
             for i in range(len(depths))]
    for name in RMT_ARCHS:
        a = resolve_arch(name)
        if (a['embed_dims'] == dims and a['depths'] == depths
                and [int(r * c) for r, c in zip(a['mlp_ratios'], dims)] == hidden
                and [s > 0 for s in a['layer_scales']] == scaled
                and all(h is None or h == n for h, n in zip(heads, a['num_heads']))):
            return name
    return None


def check_relpos(state: Mapping[str, Tensor], arch_settings: dict, prefix: str = '') -> int:
    """Check the authors' stored decay rates and rotary angles against an arch.

    mmevt recomputes both from ``num_heads``, ``init_values`` and ``heads_ranges``; a
    mismatch means the file is not of this arch, so its weights would run with other
    decays.

    Returns:
        int: number of ``Relpos`` buffers checked (they are not converted).

    Raises:
        ValueError: a stored buffer differs from the arch's.
    """
    from ..ops.decay import decay_log_rates
    checked = 0
    for i, (c, n) in enumerate(zip(arch_settings['embed_dims'], arch_settings['num_heads'])):
        key = f'{prefix}layers.{i}.Relpos.'
        expected = {
            'decay': decay_log_rates(n, arch_settings['init_values'][i],
                                     arch_settings['heads_ranges'][i]),
            # rotary angles 1 / 10000 ** linspace(0, 1, d / 2), each twice (mmevt.ops.rotary)
            'angle': (1.0 / 10000 ** torch.linspace(0, 1, c // n // 2)).repeat_interleave(2),
        }
        for name, want in expected.items():
            if key + name not in state:
                continue
            got = state[key + name].float().cpu()
            if got.shape != want.shape or not torch.allclose(got, want, atol=1e-5):
                raise ValueError(
                    f'{key}{name} of the checkpoint {got.flatten()[:4].tolist()}... differs '
                    f'from what the arch computes {want.flatten()[:4].tolist()}... (heads '
                    f'{n}, init_value {arch_settings["init_values"][i]}, heads_range '
                    f'{arch_settings["heads_ranges"][i]}): is the file of another arch?')
            checked += 1
    return checked


def _rename_rmt_key(key: str) -> str:
    """mmevt name of one authors' key ('' for keys that have no counterpart)."""
    m = re.fullmatch(r'patch_embed\.proj\.(\d+)\.(.+)', key)
    if m:
        if m.group(1) not in _STEM:
            raise KeyError(key)
        return f'backbone.stem.{_STEM[m.group(1)]}.{m.group(2)}'
    m = re.fullmatch(r'layers\.(\d+)\.(.+)', key)
    if m:
        stage, rest = int(m.group(1)), m.group(2)
        if rest.startswith('Relpos.'):  # decay rates / rotary angles: recomputed, not stored
            return ''
        if rest.startswith('downsample.'):
            rest = rest.replace('downsample.reduction.', 'downsample.conv.')
            return f'backbone.stages.{stage + 1}.{rest}'
        m2 = re.fullmatch(r'blocks\.(\d+)\.(.+)', rest)
        if m2:
            block, tail = m2.groups()
            prefix = f'backbone.stages.{stage}.blocks.{block}.'
            if tail in ('gamma_1', 'gamma_2'):
                return prefix + f'ls{tail[-1]}.gamma'
            for old, new in _BLOCK:
                if tail.startswith(old):
                    return prefix + new + tail[len(old):]
        raise KeyError(key)
    for old, new in _HEAD:
        if key.startswith(old):
            return new + key[len(old):]
    raise KeyError(key)


def _is_backbone_key(key: str) -> bool:
    """Whether an authors' key (without ``backbone.``) is part of their backbone."""
    try:
        new = _rename_rmt_key(key)
    except KeyError:
        return False
    return new == '' or new.startswith('backbone.')


def convert_rmt(state_dict: Mapping[str, Tensor], backbone_only: bool = False
                ) -> 'OrderedDict[str, Tensor]':
    """Convert an authors' RMT classifier state dict to mmevt keys.

    Args:
        state_dict (Mapping): the authors' keys (``patch_embed.*``, ``layers.*``, ``proj``,
            ``norm``, ``head`` and, token-labelled, ``aux_head``).
        backbone_only (bool): drop the classifier and the ``backbone.`` prefix (for
            ``init_cfg=dict(type='Pretrained', checkpoint=...)`` without ``prefix``).
            Defaults to False: an mmpretrain ``ImageClassifier`` state dict
            (``backbone.*``, ``neck.*``, ``head.fc.*`` and ``head.aux_fc.*``).

    Returns:
        OrderedDict: converted state dict (``Relpos`` buffers left out).

    Raises:
        ValueError: keys outside the authors' layout, listed.
    """
    out = OrderedDict()
    unknown = []
    for key, value in state_dict.items():
        try:
            new = _rename_rmt_key(key)
        except KeyError:
            unknown.append(key)
            continue
        if not new:
            continue
        if new.endswith(('ls1.gamma', 'ls2.gamma')):
            value = value.reshape(-1)  # authors' (1, 1, 1, C) -> ours (C, )
        if backbone_only:
            if not new.startswith('backbone.'):
                continue
            new = new[len('backbone.'):]
        out[new] = value
    if unknown:
        raise ValueError(f'{len(unknown)} keys are not in the authors\' RMT layout: '
                         f'{unknown}; is this an RMT classification checkpoint?')
    return out


def convert_rmt_dense(state_dict: Mapping[str, Tensor],
                      out_indices: Optional[Tuple[int, ...]] = None,
                      backbone_only: bool = False
                      ) -> Tuple['OrderedDict[str, Tensor]', List[str]]:
    """Convert an authors' mmdet 2.x / mmseg 0.x RMT detector or segmentor state dict.

    The backbone is renamed as in :func:`convert_rmt` under ``backbone.``;
    ``backbone.extra_norms.i`` (the norm on stage ``i``'s output) becomes
    ``backbone.norm{i}``; the ``Relpos`` buffers are dropped; every other key (neck, heads)
    keeps its name, which mmdet 3.x / mmseg 1.x share with mmdet 2.x / mmseg 0.x.

    Args:
        state_dict (Mapping): the authors' keys.
        out_indices (tuple[int], optional): the stages our backbone returns. The norm of a
            stage outside them is dropped, with a note: the authors' RetinaNet normalises
            all four outputs but its FPN (``start_level=1``) never reads stage 0's, while
            ours is built with ``out_indices=(1, 2, 3)``. Defaults to None (keep all).
        backbone_only (bool): keep only the backbone, without the ``backbone.`` prefix.
            Defaults to False.

    Returns:
        tuple: the converted state dict and a list of notes on what was dropped and why.

    Raises:
        ValueError: backbone keys outside the authors' layout, listed.
    """
    out, notes, backbone = OrderedDict(), [], {}
    dropped_norms, other = [], 0
    for key, value in state_dict.items():
        if not key.startswith('backbone.'):
            if not backbone_only:
                out[key] = value
            other += 1
            continue
        m = re.fullmatch(r'backbone\.extra_norms\.(\d+)\.(weight|bias)', key)
        if m:
            i = int(m.group(1))
            if out_indices is not None and i not in out_indices:
                dropped_norms.append(key)
                continue
            backbone[f'backbone.norm{i}.{m.group(2)}'] = value
            continue
        backbone[key[len('backbone.'):]] = value
    plain = {k: v for k, v in backbone.items() if not k.startswith('backbone.norm')}
    unknown = ['backbone.' + k for k in plain if not _is_backbone_key(k)]
    if unknown:
        raise ValueError(f"{len(unknown)} backbone keys are not in the authors' RMT layout, "
                         f'{unknown}; is this an RMT detection / segmentation '
                         f'checkpoint?')
    converted = convert_rmt(plain)
    converted.update({k: v for k, v in backbone.items() if k.startswith('backbone.norm')})
    for k, v in converted.items():
        out[k[len('backbone.'):] if backbone_only else k] = v
    if dropped_norms:
        notes.append(f'dropped {sorted(set(k.rsplit(".", 1)[0] for k in dropped_norms))}: '
                     f'stage(s) outside this model\'s backbone out_indices {tuple(out_indices)}. '
                     f'The authors\' backbone normalises every stage output, but their '
                     f'RetinaNet FPN (start_level=1) never reads stage 0; ours gives the FPN '
                     f'only stages 1-3 (start_level=0), the same computation.')
    if backbone_only and other:
        notes.append(f'left out {other} neck / head tensors (--backbone-only)')
    return out, notes


def convert_to_rmt(state_dict: Mapping[str, Tensor]) -> 'OrderedDict[str, Tensor]':
    """Inverse of :func:`convert_rmt` (classifier layout, ``backbone.*`` keys).

    The authors' ``Relpos`` buffers are not produced: they are recomputed from the arch.
    """
    inverse = {}
    stem_inv = {v: k for k, v in _STEM.items()}
    out = OrderedDict()
    for key, value in state_dict.items():
        m = re.fullmatch(r'backbone\.stem\.(\d\.(?:conv|norm))\.(.+)', key)
        if m:
            out[f'patch_embed.proj.{stem_inv[m.group(1)]}.{m.group(2)}'] = value
            continue
        m = re.fullmatch(r'backbone\.stages\.(\d+)\.downsample\.(conv|norm)\.(.+)', key)
        if m:
            part = 'reduction' if m.group(2) == 'conv' else 'norm'
            out[f'layers.{int(m.group(1)) - 1}.downsample.{part}.{m.group(3)}'] = value
            continue
        m = re.fullmatch(r'backbone\.stages\.(\d+)\.blocks\.(\d+)\.(.+)', key)
        if m:
            stage, block, tail = m.groups()
            prefix = f'layers.{stage}.blocks.{block}.'
            if tail in ('ls1.gamma', 'ls2.gamma'):
                out[prefix + f'gamma_{tail[2]}'] = value.reshape(1, 1, 1, -1)
                continue
            for old, new in _BLOCK:
                if tail.startswith(new):
                    out[prefix + old + tail[len(new):]] = value
                    break
            else:
                inverse[key] = value
            continue
        for old, new in _HEAD:
            if key.startswith(new):
                out[old + key[len(new):]] = value
                break
        else:
            inverse[key] = value
    if inverse:
        raise ValueError(f'keys with no RMT counterpart: {sorted(inverse)[:5]}')
    return out


def check_keys(state: Mapping[str, Tensor], model: torch.nn.Module, what: str = 'model'
               ) -> None:
    """Every key of ``state`` is one of ``model``'s and vice versa, with equal shapes.

    Raises:
        ValueError: listing the missing, unexpected and mis-shaped keys by name.
    """
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [f'{k}: file {tuple(v.shape)} vs {what} {tuple(own[k].shape)}'
              for k, v in state.items() if k in own and v.shape != own[k].shape]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f'{len(missing)} keys of the {what} not in the converted file: '
                         f'{missing}')
        if unexpected:
            parts.append(f'{len(unexpected)} converted keys the {what} does not have: '
                         f'{unexpected}')
        if shapes:
            parts.append(f'{len(shapes)} shape mismatches: {shapes}')
        raise ValueError('the converted checkpoint does not match the ' + what + ' key for '
                         'key (no partial conversion is written):\n  ' + '\n  '.join(parts))
