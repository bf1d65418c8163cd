"""Converting the RMT authors' released checkpoints to mmevt: :func:`convert_checkpoint`.

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
them, so they are checked against the arch and dropped. The key renames themselves are
:mod:`mmevt.converters.rmt_keys`; ``tools/model_converters/rmt_to_mmevt.py`` is the command
line of this module.
"""
import argparse
import os
import os.path as osp
import pickle
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from ..utils.checkpoint import unwrap_state_dict
from .rmt_keys import convert_rmt, convert_rmt_dense

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
    from ..patches.checkpoint_loading import allow_list_in_force
    try:  # (torch's safe_globals context would also remove the user's own entries on exit)
        with allow_list_in_force(AUTHORS_SAFE_GLOBALS):
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


def _notes(on_note: Optional[Callable[[str], None]]
           ) -> Tuple[List[str], Callable[[str], None]]:
    """A list of notes and the function adding one (handed to ``on_note`` as it is made,
    so that a caller printing them shows a note made before an error too)."""
    notes: List[str] = []

    def note(text: str) -> None:
        notes.append(text)
        if on_note is not None:
            on_note(text)
    return notes, note


def checkpoint_layout(ckpt: Any, source: str = 'checkpoint') -> str:
    """The layout of a loaded authors' file: ``'cls'``, ``'cls_token_label'`` or ``'dense'``.

    A classifier file is read through its first set of weights (``model``, else
    ``model_ema``); any other file through its ``state_dict`` (or itself, bare).

    Args:
        ckpt: what :func:`load_authors_checkpoint` returned.
        source (str): the file's name in errors. Defaults to ``'checkpoint'``.

    Raises:
        ValueError: not a dict, or none of the authors' layouts.
    """
    if not isinstance(ckpt, dict):
        raise ValueError(f'{source} holds a {type(ckpt).__name__}, not a checkpoint dict')
    held = [k for k in WEIGHTS if isinstance(ckpt.get(k), dict)]
    return detect_layout(ckpt[held[0]] if held else unwrap_state_dict(ckpt))


def convert_classifier_checkpoint(ckpt: Mapping, model: Optional[nn.Module] = None, *,
                                  weights: Optional[str] = None, backbone_only: bool = False,
                                  source: str = 'checkpoint',
                                  on_note: Optional[Callable[[str], None]] = None
                                  ) -> Tuple[Dict[str, Tensor], Dict[str, str], List[str]]:
    """Convert one of the authors' ImageNet classifiers (plain or token-labelled).

    The plain or EMA weights are chosen by :func:`select_weights`; the stored decay rates
    are checked against ``model``'s backbone, else against the arch found in the file.

    Args:
        ckpt (Mapping): the loaded file (``{'model', 'model_ema', 'args', ...}`` or a state
            dict).
        model (nn.Module, optional): the mmpretrain classifier the weights are for; its
            backbone's arch settings check the decay rates. Defaults to None.
        weights (str, optional): ``'model'`` or ``'model_ema'``. Defaults to None (those
            behind the authors' README number, see :data:`README_WEIGHTS`).
        backbone_only (bool): bare backbone keys (no neck / head, no prefix). Defaults to
            False.
        source (str): the file's name in notes and errors. Defaults to ``'checkpoint'``.
        on_note (callable, optional): called with each note as it is made. Defaults to None.

    Returns:
        tuple: the converted state dict, its ``meta`` (``layout``, ``weights``, ``arch``)
        and the notes (what was found and chosen).

    Raises:
        ValueError: not a classifier file, an ambiguous or absent choice of weights, keys
            outside the authors' layout or decay rates of another arch.
    """
    from ..models.backbones.archs import resolve_arch
    notes, note = _notes(on_note)
    layout = checkpoint_layout(ckpt, source)
    if layout == 'dense':
        raise ValueError(f'{source} is a detection / segmentation checkpoint: convert it '
                         'with convert_dense_checkpoint')
    held = [k for k in WEIGHTS if isinstance(ckpt.get(k), dict)]
    arch = detect_arch(ckpt[held[0]] if held else unwrap_state_dict(ckpt))
    state, which, why = select_weights(ckpt, weights, arch)
    if detect_layout(state) != layout:
        raise ValueError(f"{source}: '{which}' is a {detect_layout(state)} "
                         f"state dict, '{held[0]}' a {layout} one")
    kind = 'token-labelled classifier' if layout == 'cls_token_label' else 'classifier'
    note(f"{source}: the authors' ImageNet {kind}, arch "
         f'{arch or "unknown (no mmevt rmt-* arch matches)"}; converting '
         f"'{which}' ({why})")
    if model is not None or arch is not None:
        check_relpos(state, model.backbone.arch_settings if model is not None
                     else resolve_arch(arch))
    out = convert_rmt(state, backbone_only=backbone_only)
    return out, dict(layout=layout, weights=which, arch=str(arch)), notes


def convert_dense_checkpoint(ckpt: Mapping, model: Optional[nn.Module] = None, *,
                             weights: Optional[str] = None, backbone_only: bool = False,
                             source: str = 'checkpoint',
                             on_note: Optional[Callable[[str], None]] = None
                             ) -> Tuple[Dict[str, Tensor], Dict[str, str], List[str]]:
    """Convert one of the authors' mmdet 2.x / mmseg 0.x detectors or segmentors.

    ``model`` (the mmdet 3.x / mmseg 1.x model of the matching mmevt config) is needed
    unless ``backbone_only``: only it can tell whether the neck and heads fit. Its backbone
    gives the stages whose output norms are kept (``out_indices``) and the arch the decay
    rates are checked against; a note warns where its output norms' eps is not the
    authors'.

    Args:
        ckpt (Mapping): the loaded file (``{'state_dict': ..., 'meta': ...}`` or bare).
        model (nn.Module, optional): the model the weights are for. Defaults to None.
        weights (str, optional): must be None: these files hold one set of weights.
            Defaults to None.
        backbone_only (bool): bare backbone keys (no neck / heads, no prefix). Defaults to
            False.
        source (str): the file's name in notes and errors. Defaults to ``'checkpoint'``.
        on_note (callable, optional): called with each note as it is made. Defaults to None.

    Returns:
        tuple: the converted state dict, its ``meta`` (``layout``, ``arch``) and the notes
        (the arch found, what was dropped and why, an eps warning).

    Raises:
        ValueError: not a dense file, ``weights`` given, no ``model`` for a whole model,
            backbone keys outside the authors' layout or decay rates of another arch.
    """
    from ..models.backbones.archs import resolve_arch
    notes, note = _notes(on_note)
    if checkpoint_layout(ckpt, source) != 'dense':
        raise ValueError(f'{source} is an ImageNet classifier checkpoint: convert it with '
                         'convert_classifier_checkpoint')
    if weights:
        raise ValueError(f'--weights {weights}: {source} is a detection / '
                         "segmentation checkpoint with one set of weights "
                         "('state_dict'); drop --weights")
    state = unwrap_state_dict(ckpt)
    arch = detect_arch(state, prefix='backbone.')
    note(f"{source}: the authors' mmdet 2.x / mmseg 0.x layout, arch "
         f'{arch or "unknown (no mmevt rmt-* arch matches)"}')
    if model is None and not backbone_only:
        raise ValueError('a detection / segmentation checkpoint needs --config: the '
                         'mmevt config (configs/det/**/*rmt-* or configs/seg/**/'
                         '*rmt-*) it will be evaluated with, so that every key is '
                         'checked against that model')
    backbone = getattr(model, 'backbone', None)
    settings = (backbone.arch_settings if backbone is not None
                else resolve_arch(arch) if arch else None)
    if settings is not None:
        check_relpos(state, settings, prefix='backbone.')
    out_indices = backbone.out_indices if backbone is not None else None
    out, dropped = convert_rmt_dense(state, out_indices, backbone_only)
    for text in dropped:
        note(text)
    eps = sorted({m.eps for n, m in backbone.named_children()
                  if n.startswith('norm') and hasattr(m, 'eps')}
                 ) if backbone is not None else []
    if eps and eps != [AUTHORS_OUT_NORM_EPS]:
        note(f'WARNING: this config\'s backbone output norms have eps {eps}; the '
             f'authors\' are nn.LayerNorm with eps {AUTHORS_OUT_NORM_EPS}: set '
             "model.backbone.out_norm_cfg=dict(type='LN', eps=1e-5) to compute "
             'exactly what they did')
    return out, dict(layout='dense', arch=str(arch)), notes


def convert_checkpoint(ckpt_or_path: Union[str, 'os.PathLike', Mapping],
                       model: Optional[nn.Module] = None, *, weights: Optional[str] = None,
                       backbone_only: bool = False, trust: bool = False,
                       source: Optional[str] = None, model_name: Optional[str] = None,
                       on_note: Optional[Callable[[str], None]] = None
                       ) -> Tuple[Dict[str, Tensor], Dict[str, str], List[str]]:
    """Convert one of the authors' RMT checkpoints to mmevt, whatever its layout.

    The layout is found from the keys (:func:`checkpoint_layout`) and the file handed to
    :func:`convert_classifier_checkpoint` or :func:`convert_dense_checkpoint`. With
    ``model``, every converted key is checked against it (or its backbone, with
    ``backbone_only``): a missing, unexpected or mis-shaped key is an error naming them; the
    weights are then loaded into it strictly (which checks the copies too).

    Args:
        ckpt_or_path (str | os.PathLike | Mapping): a file (read by
            :func:`load_authors_checkpoint`) or what it returned.
        model (nn.Module, optional): the mmevt model the weights are for (needed for a
            detector / segmentor unless ``backbone_only``). Defaults to None.
        weights (str, optional): ImageNet files: ``'model'`` or ``'model_ema'``. Defaults to
            None (those behind the authors' README number).
        backbone_only (bool): bare backbone keys (for ``init_cfg=dict(type='Pretrained',
            checkpoint=...)``). Defaults to False.
        trust (bool): read a path with ``weights_only=False`` (runs any code the file
            pickles). Defaults to False.
        source (str, optional): the file's name in notes and errors; its basename is
            ``meta['converted_from']``. Defaults to None (the path, or ``'checkpoint'``).
        model_name (str, optional): what key errors call ``model``, as in ``'model of
            <model_name>'``. Defaults to None (``'model'`` / ``'backbone'``).
        on_note (callable, optional): called with each note as it is made (e.g.
            ``print``). Defaults to None.

    Returns:
        tuple: ``(state, meta, notes)``: the converted state dict; ``meta`` for the saved
        file (``converted_from``, ``layout``, ``weights`` for ImageNet files, ``arch``);
        the notes (what was found, chosen and dropped, and why).

    Raises:
        ValueError: the file is not one of the authors' layouts or does not fit ``model``
            (:class:`UntrustedCheckpointError` where it pickles other objects).
    """
    if isinstance(ckpt_or_path, (str, os.PathLike)):
        path = os.fspath(ckpt_or_path)
        source = source or path
        ckpt = load_authors_checkpoint(path, trust=trust)
    else:
        ckpt = ckpt_or_path
    source = source or 'checkpoint'
    layout = checkpoint_layout(ckpt, source)
    convert = convert_dense_checkpoint if layout == 'dense' else convert_classifier_checkpoint
    state, meta, notes = convert(ckpt, model, weights=weights, backbone_only=backbone_only,
                                 source=source, on_note=on_note)
    if model is not None:
        part = 'backbone' if backbone_only else 'model'
        target = model.backbone if backbone_only else model
        check_keys(state, target, f'{part} of {model_name}' if model_name else part)
        target.load_state_dict(state, strict=True)  # also checks dtypes / copies
    return state, dict(converted_from=osp.basename(source), **meta), notes
