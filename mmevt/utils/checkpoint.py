"""Checkpoints: the weights inside one (:func:`unwrap_state_dict`), and OpenMMLab runner
checkpoints loaded under ``torch.load(weights_only=True)``.

torch >= 2.6 unpickles with ``weights_only=True`` by default; mmengine 0.10.7 does not
pass ``weights_only`` and its checkpoints hold a few non-tensor objects (the message hub's
``HistoryBuffer``s, numpy scalars and arrays in logs and meta, ``HistoryBuffer`` methods).
Rather than turning the safety off, this module allow-lists exactly those classes. Anything
else (``os.system``, arbitrary callables) is still refused by torch's restricted unpickler.
"""
import pickle
from typing import Any, Dict, List, Mapping

import numpy as np
import torch


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
