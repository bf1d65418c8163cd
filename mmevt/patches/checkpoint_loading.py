"""Checkpoints load under ``torch.load(weights_only=True)`` on every stack, and only so.

Two parts:

- **The allow-list** (:func:`enable_safe_checkpoint_loading`). torch >= 2.6 unpickles with
  ``weights_only=True`` by default; OpenMMLab runner checkpoints hold a few non-tensor
  objects (the message hub's ``HistoryBuffer``s, numpy scalars and arrays in logs and meta,
  ``HistoryBuffer`` methods pickled as ``getattr(HistoryBuffer, name)``). Rather than turning
  the safety off, exactly those are allow-listed, with a restricted stand-in for ``getattr``
  (:func:`checkpoint_getattr`). Anything else (``os.system``, arbitrary callables) is refused.
- **The loader** (:func:`enable_strict_checkpoint_loader`). mmengine's ``CheckpointLoader``
  loads local files through :func:`strict_torch_load`: the allow-list in force for the load,
  an unpickling error raised with what to do, never a silent ``weights_only=False``. That is
  stricter than the onedl fork's own ``_safe_torch_load``, which retries a refused file with
  ``weights_only=False`` (so a pickled ``os.system`` runs), allows the real ``getattr``, and
  loads inside ``torch.serialization.safe_globals``, whose exit removes every entry of its
  list, including the ones registered here. A user who trusts a file opts out explicitly with
  ``MMEVT_ALLOW_UNSAFE_CHECKPOINTS=1`` (:data:`UNSAFE_ENV`), which is logged at each use.
"""
import contextlib
import logging
import os
import os.path as osp
import pickle
from typing import Any, Iterator, List

import numpy as np
import torch

UNSAFE_ENV = 'MMEVT_ALLOW_UNSAFE_CHECKPOINTS'


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


def _is_real_getattr(entry: object) -> bool:
    return entry is getattr or (isinstance(entry, tuple) and entry[0] is getattr)


def enable_safe_checkpoint_loading() -> None:
    """Allow-list the classes OpenMMLab runner checkpoints need for ``weights_only`` loads.

    Idempotent; call it again to restore entries someone removed. A no-op on torch versions
    without ``add_safe_globals`` (< 2.4), which do not default to ``weights_only=True``.
    """
    add = getattr(torch.serialization, 'add_safe_globals', None)
    if add is None:
        return
    have = torch.serialization.get_safe_globals()
    missing = [g for g in SAFE_CHECKPOINT_GLOBALS if g not in have]
    if missing:
        add(missing)


@contextlib.contextmanager
def allow_list_in_force() -> Iterator[None]:
    """For the duration of a load: mmevt's allow-list registered, and no real ``getattr``.

    torch keeps its safe globals in a set and looks them up by name, so the real
    ``getattr`` (which the fork's list has) and :func:`checkpoint_getattr` registered together
    under ``builtins.getattr`` make the outcome depend on set order. The entries that were
    registered before are put back afterwards, with mmevt's own added.
    """
    ser = torch.serialization
    if not hasattr(ser, 'add_safe_globals'):
        yield
        return
    before = ser.get_safe_globals()
    ser.clear_safe_globals()
    ser.add_safe_globals([g for g in before if not _is_real_getattr(g)])
    enable_safe_checkpoint_loading()
    try:
        yield
    finally:
        ser.clear_safe_globals()
        ser.add_safe_globals(before)
        enable_safe_checkpoint_loading()


def _describe(file: Any) -> str:
    return repr(file) if isinstance(file, (str, os.PathLike)) else type(file).__name__


def strict_torch_load(file: Any, map_location: Any = None, weights_only: Any = None) -> Any:
    """``torch.load(file, weights_only=True)`` with mmevt's allow-list; refused files raise.

    The signature of the fork's ``mmengine.runner.checkpoint._safe_torch_load``, which this
    replaces there. ``weights_only=False`` from a caller, or ``MMEVT_ALLOW_UNSAFE_CHECKPOINTS=1``
    after a refusal, loads with the full unpickler (logged: it can run any code in the file).

    Raises:
        pickle.UnpicklingError: the file pickles something outside the allow-list.
    """
    from mmengine.logging import print_log
    if weights_only is False:
        print_log(f'mmevt: loading {_describe(file)} with weights_only=False, as the caller '
                  'asked (unpickling can run code from the file)', logger='current',
                  level=logging.WARNING)
        return torch.load(file, map_location=map_location, weights_only=False)
    try:
        with allow_list_in_force():
            return torch.load(file, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if os.environ.get(UNSAFE_ENV) != '1':
            raise pickle.UnpicklingError(
                f'mmevt refused to load checkpoint {_describe(file)}: it pickles objects '
                f'outside the weights_only allow-list. {err}\nIf you trust this file, set '
                f'{UNSAFE_ENV}=1 to load it with weights_only=False (its pickled code '
                'runs).') from err
        print_log(f'mmevt: {UNSAFE_ENV}=1: loading {_describe(file)} with '
                  f'weights_only=False after it was refused ({err})', logger='current',
                  level=logging.WARNING)
        if hasattr(file, 'seek'):
            file.seek(0)
        return torch.load(file, map_location=map_location, weights_only=False)


def load_from_local(filename: str, map_location: Any = None) -> Any:
    """mmengine's local-file scheme (``CheckpointLoader``, prefix ``''``) through
    :func:`strict_torch_load`; the checks and error of mmengine's own ``load_from_local``."""
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    return strict_torch_load(filename, map_location=map_location)


def enable_strict_checkpoint_loader() -> None:
    """Route mmengine's checkpoint loading through :func:`strict_torch_load`. Idempotent.

    Both stacks: the local-file scheme of ``CheckpointLoader`` (upstream mmengine calls
    ``torch.load`` there; the fork calls ``_safe_torch_load``). The fork: its
    ``_safe_torch_load`` too, which its other schemes (ceph, pavi, bytes) call.
    """
    from mmengine.runner import checkpoint
    schemes = checkpoint.CheckpointLoader._schemes
    if schemes.get('') is not load_from_local:
        checkpoint.CheckpointLoader.register_scheme(prefixes='', loader=load_from_local,
                                                    force=True)
    if hasattr(checkpoint, '_safe_torch_load'):
        checkpoint._safe_torch_load = strict_torch_load
