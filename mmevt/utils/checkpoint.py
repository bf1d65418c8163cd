"""Checkpoints: the weights inside one (:func:`unwrap_state_dict`), pretrained backbone
weights loaded with every mismatch reported (:func:`load_backbone_checkpoint`), and OpenMMLab
runner checkpoints loaded under ``torch.load(weights_only=True)``.

torch >= 2.6 unpickles with ``weights_only=True`` by default; mmengine 0.10.7 does not
pass ``weights_only`` and its checkpoints hold a few non-tensor objects (the message hub's
``HistoryBuffer``s, numpy scalars and arrays in logs and meta, ``HistoryBuffer`` methods).
Rather than turning the safety off, this module allow-lists exactly those classes. Anything
else (``os.system``, arbitrary callables) is still refused by torch's restricted unpickler.
"""
import logging
import os.path as osp
import pickle
import zipfile
from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import torch
from torch import nn


# wrappers a checkpoint's weights come in, in the order they are looked for: OpenMMLab
# runners save ``state_dict``, the authors' RMT / timm-style releases ``model``
STATE_DICT_KEYS = ('state_dict', 'model')


def unwrap_state_dict(ckpt: Mapping) -> Dict[str, Any]:
    """The weights inside a loaded checkpoint: ``ckpt['state_dict']``, ``ckpt['model']``
    (the first of :data:`STATE_DICT_KEYS` holding a mapping), or ``ckpt`` itself (bare).

    Returns:
        dict: parameter name -> tensor (a new dict; the tensors are not copied).
    """
    for key in STATE_DICT_KEYS:
        if isinstance(ckpt.get(key), Mapping):
            return dict(ckpt[key])
    return dict(ckpt)


def load_backbone_checkpoint(model: nn.Module, ckpt: Optional[str],
                             prefix: Optional[str] = None, map_location: str = 'cpu',
                             owner: str = 'EVT') -> None:
    """Load a backbone's weights from ``ckpt`` (keys under ``prefix`` if given).

    Loaded through mmengine's ``CheckpointLoader`` (local files under ``weights_only``, URLs)
    but never silently partially: a missing file, a truncated one, tensors of the wrong shape
    and a file sharing no key with the model are errors naming the problem; missing and
    unexpected keys are logged (WARNING).

    Args:
        model (nn.Module): the backbone, loaded in place.
        ckpt (str, optional): a path or URL; the config key users set is
            ``init_cfg.checkpoint``.
        prefix (str, optional): keep only keys under it, stripped (e.g. ``'backbone.'``).
            Defaults to None.
        map_location (str): where tensors are loaded. Defaults to ``'cpu'``.
        owner (str): the model's name in messages. Defaults to ``'EVT'``.

    Raises:
        FileNotFoundError: ``ckpt`` is not given or not an existing file.
        ValueError: the file is not a checkpoint, or does not fit the model.
    """
    from mmengine.logging import print_log
    from mmengine.runner.checkpoint import CheckpointLoader
    if not ckpt or ('://' not in str(ckpt) and not osp.isfile(ckpt)):
        raise FileNotFoundError(
            f'init_cfg.checkpoint of {owner}: checkpoint file {ckpt!r} does not exist. '
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
    own = model.state_dict()
    shape_errors = [f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
                    for k, v in state.items() if k in own and v.shape != own[k].shape]
    if shape_errors:
        raise ValueError(f'{ckpt}: {len(shape_errors)} tensors have the wrong shape for '
                         f'this {owner} arch, e.g. {shape_errors[:3]}; is it a checkpoint of '
                         'another arch?')
    matched = {k: v for k, v in state.items() if k in own}
    if not matched:
        raise ValueError(f'{ckpt}: none of its {len(state)} tensors (prefix {prefix!r}) is '
                         f'an {owner} key, e.g. {sorted(state)[:3]} vs {sorted(own)[:3]}; set '
                         "init_cfg.prefix (e.g. 'backbone.') to match the checkpoint")
    model.load_state_dict(matched, strict=False)
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    print_log(f'{owner}: loaded {len(matched)}/{len(own)} tensors from {ckpt}'
              + (f'; missing (kept at init): {missing}' if missing else '')
              + (f'; unexpected (ignored): {unexpected}' if unexpected else ''),
              logger='current', level=logging.WARNING if missing or unexpected
              else logging.INFO)


def _numpy_globals() -> List[object]:
    # numpy 2 moved ``numpy.core`` to ``numpy._core``; pickles name the module they were
    # written with, so allow both spellings where they exist.
    objs: List[object] = [np.ndarray, np.dtype]
    for mod_name in ('numpy._core.multiarray', 'numpy.core.multiarray'):
        try:
            mod = __import__(mod_name, fromlist=['_reconstruct'])
        except ImportError:
            continue
        objs += [mod._reconstruct, mod.scalar]
    # numpy >= 1.25 pickles dtypes by their class (``numpy.dtypes.Float64DType`` ...).
    dtypes = getattr(np, 'dtypes', None)
    if dtypes is not None:
        objs += [getattr(dtypes, n) for n in dir(dtypes) if n.endswith('DType')]
    return objs


def _mmengine_globals() -> List[object]:
    from mmengine.logging import HistoryBuffer
    return [HistoryBuffer]


def checkpoint_getattr(obj: Any, name: str) -> Any:
    """The only ``getattr`` a checkpoint may call: a ``HistoryBuffer`` statistics method.

    The message hub pickles ``HistoryBuffer._statistics_methods`` (``min``, ``max``,
    ``mean``, ``current`` and registered ones) as ``getattr(HistoryBuffer, name)``.
    Allow-listing the builtin ``getattr`` would let a checkpoint reach any attribute, so
    this stands in for it under the pickled name and refuses everything else.
    """
    from mmengine.logging import HistoryBuffer

    # the built-in four are added to the class dict lazily, by the first instance
    allowed = set(HistoryBuffer._statistics_methods) | {'min', 'max', 'mean', 'current'}
    if obj is HistoryBuffer and name in allowed:
        return getattr(obj, name)
    raise pickle.UnpicklingError(
        f'checkpoint asks for getattr({obj!r}, {name!r}); mmevt only allows '
        f'HistoryBuffer statistics methods {sorted(allowed)}')


def _safe_globals() -> List[object]:
    seen, out = set(), []
    for obj in _numpy_globals() + _mmengine_globals():
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
    return out


SAFE_CHECKPOINT_GLOBALS: List[object] = _safe_globals() + [
    (checkpoint_getattr, 'builtins.getattr'), (checkpoint_getattr, '__builtin__.getattr')]


def enable_safe_checkpoint_loading() -> None:
    """Allow-list the classes OpenMMLab runner checkpoints need for ``weights_only`` loads.

    Idempotent. A no-op on torch versions without ``add_safe_globals`` (< 2.4), which
    do not default to ``weights_only=True`` either.
    """
    add = getattr(torch.serialization, 'add_safe_globals', None)
    if add is None:
        return
    have = torch.serialization.get_safe_globals()
    missing = [g for g in SAFE_CHECKPOINT_GLOBALS if g not in have]
    if missing:
        add(missing)
