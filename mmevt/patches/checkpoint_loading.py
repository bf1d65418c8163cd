"""Checkpoints load under ``torch.load(weights_only=True)`` on every stack, and only so.

Two parts, two patches of :data:`mmevt.patches.PATCHES`:

- **The allow-list** (``checkpoint-allow-list``, :func:`enable_safe_checkpoint_loading`).
  torch >= 2.6 unpickles with ``weights_only=True`` by default; OpenMMLab runner checkpoints
  hold a few non-tensor objects: the message hub's ``HistoryBuffer``s, numpy scalars, arrays
  and dtypes in logs and meta (named ``numpy.core.multiarray...`` by numpy 1, which wrote most
  existing checkpoints, ``numpy._core.multiarray...`` by numpy 2), ``HistoryBuffer`` methods
  pickled as ``getattr(HistoryBuffer, name)`` and ``OneCycleParamScheduler``'s anneal function
  pickled as ``getattr(OneCycleParamScheduler, '_annealing_cos')``. Exactly those are
  allow-listed, each under every name it is pickled by, with a restricted stand-in for
  ``getattr`` (:func:`checkpoint_getattr`); the scheduler class itself is not: its name
  resolves to an inert stand-in (:data:`ONE_CYCLE_NAME`) that only that ``getattr`` accepts.
- **The loader** (``strict-checkpoint-loader``, :func:`enable_strict_checkpoint_loader`).
  Every scheme of mmengine's ``CheckpointLoader`` loads through :func:`strict_torch_load`
  (local files, and on upstream mmengine the ``torch.load`` of its pavi / ceph / local
  open-mmlab loaders) or :func:`strict_load_url` (the ``load_url`` that http(s),
  torchvision, modelzoo, URL-backed open-mmlab and mmcls call by name; it is
  ``torch.hub.load_state_dict_from_url``, whose ``weights_only`` defaults to False). Both
  load with the allow-list in force and raise a refusal in mmevt's words
  (:func:`refusal_message`), never a silent ``weights_only=False`` as the onedl fork's own
  ``_safe_torch_load`` does (it also allows the real ``getattr`` and loads inside
  ``torch.serialization.safe_globals``, whose exit removes every entry of its list,
  including the ones registered here).

Opting out is explicit, per process, and logged at each use (:func:`unsafe_opt_out`):
``MMEVT_ALLOW_UNSAFE_CHECKPOINTS`` or torch's own ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``,
with torch's truth values (1 / y / yes / true). torch's ``TORCH_FORCE_WEIGHTS_ONLY_LOAD``
wins over both, as it does in ``torch.load``.
"""
import contextlib
import logging
import os
import os.path as osp
import pickle
import re
import sys
import threading
import types
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

UNSAFE_ENV = 'MMEVT_ALLOW_UNSAFE_CHECKPOINTS'
TORCH_NO_WEIGHTS_ONLY_ENV = 'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'
TORCH_WEIGHTS_ONLY_ENV = 'TORCH_FORCE_WEIGHTS_ONLY_LOAD'
# torch.load's truth values for its switches (torch/serialization.py, lower-cased)
TRUE_VALUES = ('1', 'y', 'yes', 'true')
ONE_CYCLE = 'mmengine.optim.scheduler.param_scheduler.OneCycleParamScheduler'


def env_flag(name: str) -> bool:
    """Whether environment variable ``name`` is set true, as torch reads its switches."""
    return os.environ.get(name, '0').lower() in TRUE_VALUES


# ------------------------------------------------------------------------- the allow-list
def _spellings(obj: object, names: List[str]) -> List[object]:
    """``obj`` allow-listed under each of ``names``: itself where its own name is one of them
    (torch keys plain entries by ``__module__.__qualname__``), a ``(obj, name)`` pair for
    every other name it is pickled by."""
    own = f'{obj.__module__}.{obj.__qualname__}'
    return [obj if name == own else (obj, name) for name in names]


def _numpy_globals() -> List[object]:
    # numpy 2 moved numpy.core to numpy._core; a pickle names the module it was written
    # with, so each object is allowed under both names, whichever numpy is installed
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x before numpy._core existed
        from numpy.core import multiarray
    objs: List[object] = [np.ndarray, np.dtype, slice]  # slice: as the fork's own list
    for name in ('_reconstruct', 'scalar'):
        objs += _spellings(getattr(multiarray, name),
                           [f'numpy.{core}.multiarray.{name}' for core in ('_core', 'core')])
    # numpy >= 1.25 pickles dtypes by their class (``numpy.dtypes.Float64DType`` ...)
    dtypes = getattr(np, 'dtypes', None)
    if dtypes is not None:
        objs += [getattr(dtypes, n) for n in dir(dtypes) if n.endswith('DType')]
    return objs


class CheckpointClassName:
    """What a checkpoint gets for a class it may only read named attributes of.

    Inert: calling or instantiating it is refused, it is not a class and has no attribute of
    the real class; :func:`checkpoint_getattr` is the only thing that accepts it and returns
    the real class's attribute for the names in :attr:`attributes`.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> 'CheckpointClassName':
        if not isinstance(cls, type):  # a pickle instantiating the stand-in (NEWOBJ)
            raise pickle.UnpicklingError(f'checkpoint instantiates {cls!r}; mmevt allows only '
                                         f'reading {cls.attributes} of it')
        return super().__new__(cls)

    def __init__(self, path: str, attributes: Tuple[str, ...]):
        self.path, self.attributes = path, attributes

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # a pickle calling it (REDUCE)
        raise pickle.UnpicklingError(f'checkpoint calls {self!r}; mmevt allows only reading '
                                     f'{self.attributes} of it')

    def resolve(self, name: str) -> Any:
        """The real class's attribute ``name`` (only for :attr:`attributes`)."""
        import importlib
        module, _, cls = self.path.rpartition('.')
        return getattr(getattr(importlib.import_module(module), cls), name)

    def __repr__(self) -> str:
        return f'<checkpoint name {self.path}>'


# OneCycle{LR,Momentum,ParamScheduler} keep their anneal function (a staticmethod) in their
# state; pickle protocol 2 writes it as getattr(OneCycleParamScheduler, '_annealing_cos')
ONE_CYCLE_NAME = CheckpointClassName(ONE_CYCLE, ('_annealing_cos', '_annealing_linear'))


def checkpoint_getattr(obj: Any, name: str) -> Any:
    """The only ``getattr`` a checkpoint may call.

    Two uses exist in runner checkpoints: the message hub pickles
    ``HistoryBuffer._statistics_methods`` (``min``, ``max``, ``mean``, ``current`` and
    registered ones) as ``getattr(HistoryBuffer, name)``, and OneCycle schedulers their
    anneal function (:data:`ONE_CYCLE_NAME`). Allow-listing the builtin ``getattr`` would let
    a checkpoint reach any attribute, so this stands in for it under the pickled name and
    refuses everything else.
    """
    from mmengine.logging import HistoryBuffer

    if (not getattr(_STRICT, 'active', False)
            and any(map(_is_real_getattr, torch.serialization.get_safe_globals()))):
        # another caller's own torch.load, after the user allow-listed the real getattr:
        # theirs, whichever of the two entries torch's set order picked
        return getattr(obj, name)
    # the built-in four are added to the class dict lazily, by the first instance
    allowed = set(HistoryBuffer._statistics_methods) | {'min', 'max', 'mean', 'current'}
    if obj is HistoryBuffer and name in allowed:
        return getattr(obj, name)
    if obj is ONE_CYCLE_NAME and name in ONE_CYCLE_NAME.attributes:
        return ONE_CYCLE_NAME.resolve(name)
    raise pickle.UnpicklingError(
        f'checkpoint asks for getattr({obj!r}, {name!r}); mmevt only allows '
        f'HistoryBuffer statistics methods {sorted(allowed)} and '
        f'{ONE_CYCLE.rpartition(".")[2]}.{{{", ".join(ONE_CYCLE_NAME.attributes)}}}')


def _mmengine_globals() -> List[object]:
    from mmengine.logging import HistoryBuffer
    return [HistoryBuffer, (ONE_CYCLE_NAME, ONE_CYCLE)]


def _safe_globals() -> List[object]:
    seen, out = set(), []
    for entry in _numpy_globals() + _mmengine_globals():
        key = tuple(map(id, entry)) if isinstance(entry, tuple) else id(entry)
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


SAFE_CHECKPOINT_GLOBALS: List[object] = _safe_globals() + [
    (checkpoint_getattr, 'builtins.getattr'), (checkpoint_getattr, '__builtin__.getattr')]


def _is_real_getattr(entry: object) -> bool:
    return entry is getattr or (isinstance(entry, tuple) and entry[0] is getattr)


def enable_safe_checkpoint_loading() -> None:
    """Allow-list the objects OpenMMLab runner checkpoints need for ``weights_only`` loads.

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


_LOADING = threading.RLock()  # one load at a time changes torch's process-wide list
_STRICT = threading.local()  # .active: inside allow_list_in_force in this thread


@contextlib.contextmanager
def allow_list_in_force(extra: Sequence[Any] = ()) -> Iterator[None]:
    """For the duration of a load: mmevt's allow-list registered (unless its patch is switched
    off), ``extra`` entries too, and no real ``getattr``.

    torch keeps its safe globals in a set and looks them up by name, so the real
    ``getattr`` (which the fork's list has) and :func:`checkpoint_getattr` registered together
    under ``builtins.getattr`` make the outcome depend on set order. The entries that were
    registered before are put back afterwards, and only those (unlike
    ``torch.serialization.safe_globals``, whose exit also removes entries it did not add).
    """
    from . import is_applied
    ser = torch.serialization
    if not hasattr(ser, 'add_safe_globals'):
        yield
        return
    ours = is_applied('checkpoint-allow-list')
    with _LOADING:
        before = ser.get_safe_globals()
        ser.clear_safe_globals()
        ser.add_safe_globals([g for g in before if not _is_real_getattr(g)] + list(extra))
        if ours:
            enable_safe_checkpoint_loading()
        _STRICT.active = True
        try:
            yield
        finally:
            _STRICT.active = False
            ser.clear_safe_globals()
            ser.add_safe_globals(before)
            if ours:
                enable_safe_checkpoint_loading()


# ---------------------------------------------------------------------------- refusals
_ANSI = re.compile(r'\x1b\[[0-9;]*m')
_REFUSED_GLOBAL = re.compile(r'GLOBAL (\S+) (?:was not an allowed global|whose module)')


def unsafe_opt_out() -> Optional[str]:
    """The environment variable by which the user opted out of safe loading, or None.

    ``MMEVT_ALLOW_UNSAFE_CHECKPOINTS`` is mmevt's. torch's ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``
    counts too: it is how a user tells torch to unpickle fully where a caller does not choose,
    and mmengine's loaders do not choose, so without mmevt it would apply to them; mmevt
    passes ``weights_only=True`` explicitly, which torch's switch does not override, so mmevt
    honours it itself (logged at each use) rather than silently ignoring it.
    """
    for name in (UNSAFE_ENV, TORCH_NO_WEIGHTS_ONLY_ENV):
        if env_flag(name):
            return name
    return None


def _allow_list_fix(name: str) -> str:
    """The ``add_safe_globals`` call that allows global ``name``, spelled so it works.

    The pair form ``(object, 'pickled.name')`` works whatever the object's own
    ``__module__.__qualname__`` is (numpy 2's objects pickled by numpy 1 are named
    ``numpy.core...`` in the file and ``numpy._core...`` in the process). Only modules
    already imported are looked at: nothing a refused file names is imported.
    """
    module, _, attr = name.rpartition('.')
    for candidate in (module, module.replace('numpy.core', 'numpy._core', 1)):
        obj = sys.modules.get(candidate)
        for part in attr.split('.'):
            obj = getattr(obj, part, None)
        if obj is not None and hasattr(obj, '__qualname__'):
            real = f'{obj.__module__}.{obj.__qualname__}'
            return (f'import torch, {obj.__module__}; torch.serialization.add_safe_globals('
                    f'[({real}, {name!r})])')
    return (f'import torch, {module}; torch.serialization.add_safe_globals([({name}, '
            f'{name!r})])')


def refusal_message(what: str, err: BaseException) -> str:
    """Why ``what`` was refused and what to do, in mmevt's words first (no colour codes):
    the refused global, the allow-list call that fixes it, the opt-out, then torch's text."""
    from . import switched_off_note
    torch_text = _ANSI.sub('', str(err))
    match = _REFUSED_GLOBAL.search(torch_text)
    lines = [f'mmevt refused to load checkpoint {what}: weights_only=True refuses what it '
             'pickles' + (f': the global {match.group(1)}.' if match else '.')]
    if match and 'is blocked' in torch_text:
        lines.append(f'torch blocks the module of {match.group(1)} outright; no allow-list '
                     'entry can allow it.')
    elif match:
        lines.append('If you know that object to be safe, allow it before loading: '
                     f'{_allow_list_fix(match.group(1))}')
    if env_flag(TORCH_WEIGHTS_ONLY_ENV):
        lines.append(f'{TORCH_WEIGHTS_ONLY_ENV}={os.environ[TORCH_WEIGHTS_ONLY_ENV]} is set: '
                     'torch then loads every file with weights_only=True, which wins over '
                     f"mmevt's opt-out ({UNSAFE_ENV}); unset it to load this file unsafely.")
    else:
        lines.append(f'If you trust the whole file, set {UNSAFE_ENV}=1: it is then loaded '
                     'with weights_only=False, which runs any code pickled in it (logged).')
    note = switched_off_note('checkpoint-allow-list')
    if note:
        lines.append('OpenMMLab runner checkpoints need its allow-list:' + note)
    return '\n'.join(lines + [f'torch: {torch_text}'])


def _log_unsafe_as_asked(what: str) -> None:
    """The warning for a load whose caller passed ``weights_only=False`` itself."""
    from mmengine.logging import print_log
    print_log(f'mmevt: loading {what} with weights_only=False, as the caller asked '
              '(unpickling can run code from the file)', logger='current',
              level=logging.WARNING)


def _describe(file: Any) -> str:
    return repr(file) if isinstance(file, (str, os.PathLike)) else type(file).__name__


def _load_strictly(what: str, load: Callable[[bool], Any], caller_chose: bool = False) -> Any:
    """``load(True)`` with the allow-list in force; a refusal raises :func:`refusal_message`
    unless the user opted out (:func:`unsafe_opt_out`) and the caller did not ask for
    ``weights_only=True`` itself (``caller_chose``), then ``load(False)``, logged.

    Raises:
        ValueError: both of torch's switches are set (torch refuses that too).
        pickle.UnpicklingError: the file was refused.
    """
    from mmengine.logging import print_log
    if env_flag(TORCH_WEIGHTS_ONLY_ENV) and env_flag(TORCH_NO_WEIGHTS_ONLY_ENV):
        raise ValueError(f'mmevt cannot load checkpoint {what}: both {TORCH_WEIGHTS_ONLY_ENV}='
                         f'{os.environ[TORCH_WEIGHTS_ONLY_ENV]} and {TORCH_NO_WEIGHTS_ONLY_ENV}='
                         f'{os.environ[TORCH_NO_WEIGHTS_ONLY_ENV]} are set; torch allows one '
                         'of them: unset the one you did not mean')
    try:
        with allow_list_in_force():
            return load(True)
    except pickle.UnpicklingError as err:
        opt_out = unsafe_opt_out()
        if opt_out is None or caller_chose or env_flag(TORCH_WEIGHTS_ONLY_ENV):
            raise pickle.UnpicklingError(refusal_message(what, err)) from None
        print_log(f'mmevt: {opt_out}={os.environ[opt_out]}: loading {what} with '
                  f'weights_only=False after weights_only=True refused it '
                  f'({_ANSI.sub("", str(err)).splitlines()[0]}); unpickling can run code '
                  'from the file', logger='current', level=logging.WARNING)
        return load(False)


def strict_torch_load(file: Any, map_location: Any = None,
                      weights_only: Optional[bool] = None) -> Any:
    """``torch.load(file, weights_only=True)`` with mmevt's allow-list; refused files raise.

    The signature of the fork's ``mmengine.runner.checkpoint._safe_torch_load``, which this
    replaces there. ``weights_only=False`` from a caller loads with the full unpickler
    (logged: it can run any code in the file), as does an opt-out after a refusal.

    Raises:
        pickle.UnpicklingError: the file pickles something outside the allow-list.
    """
    if weights_only is False:
        _log_unsafe_as_asked(_describe(file))
        return torch.load(file, map_location=map_location, weights_only=False)

    def load(safe: bool) -> Any:
        if hasattr(file, 'seek'):
            file.seek(0)
        return torch.load(file, map_location=map_location, weights_only=safe)

    return _load_strictly(_describe(file), load, caller_chose=weights_only is True)


def strict_load_url(url: str, model_dir: Optional[str] = None, map_location: Any = None,
                    progress: bool = True, check_hash: bool = False,
                    file_name: Optional[str] = None,
                    weights_only: Optional[bool] = None) -> Any:
    """mmengine's ``load_url`` (``torch.hub.load_state_dict_from_url``: downloaded into
    torch.hub's cache once) loaded as :func:`strict_torch_load` loads a file.

    Args:
        url (str): the checkpoint's URL; the other arguments are torch.hub's, and
            ``weights_only`` is ignored unless False (then as :func:`strict_torch_load`).

    Raises:
        pickle.UnpicklingError: the file pickles something outside the allow-list.
    """
    def load(safe: bool) -> Any:
        # a second call (the opt-out) finds the file in the cache and downloads nothing
        return torch.hub.load_state_dict_from_url(
            url, model_dir=model_dir, map_location=map_location, progress=progress,
            check_hash=check_hash, file_name=file_name, weights_only=safe)

    if weights_only is False:
        _log_unsafe_as_asked(repr(url))
        return load(False)
    return _load_strictly(repr(url), load, caller_chose=weights_only is True)


def load_from_local(filename: str, map_location: Any = None) -> Any:
    """mmengine's local-file scheme (``CheckpointLoader``, prefix ``''``) through
    :func:`strict_torch_load`; the checks and error of mmengine's own ``load_from_local``."""
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    return strict_torch_load(filename, map_location=map_location)


class TorchWithStrictLoad(types.ModuleType):
    """The name ``torch`` inside ``mmengine.runner.checkpoint``: torch, but for ``load``.

    Upstream mmengine's pavi, ceph (s3 / petrel) and local open-mmlab loaders call
    ``torch.load`` by that name; this makes exactly those calls strict, and no other code's.
    """

    def __init__(self) -> None:
        super().__init__('torch', torch.__doc__)

    def __getattr__(self, name: str) -> Any:  # every name but load is torch's own
        return getattr(torch, name)

    @staticmethod
    def load(f: Any, map_location: Any = None, weights_only: Any = None, **kwargs) -> Any:
        if kwargs:  # pickle_module and friends: only meaningful for an unsafe load
            raise TypeError(f'mmevt: checkpoint loads take no {sorted(kwargs)}')
        return strict_torch_load(f, map_location=map_location, weights_only=weights_only)


def enable_strict_checkpoint_loader() -> None:
    """Route every scheme of mmengine's checkpoint loading through the strict loaders.
    Idempotent.

    Both stacks: the local-file scheme of ``CheckpointLoader``, the ``load_url`` its URL
    schemes call by name, and its module's ``torch.load`` (upstream's pavi / ceph / local
    open-mmlab loaders). The fork: its ``_safe_torch_load`` too, which its other schemes call.
    """
    from mmengine.runner import checkpoint
    schemes = checkpoint.CheckpointLoader._schemes
    if schemes.get('') is not load_from_local:
        checkpoint.CheckpointLoader.register_scheme(prefixes='', loader=load_from_local,
                                                    force=True)
    checkpoint.load_url = strict_load_url
    if not isinstance(checkpoint.torch, TorchWithStrictLoad):
        checkpoint.torch = TorchWithStrictLoad()
    if hasattr(checkpoint, '_safe_torch_load'):
        checkpoint._safe_torch_load = strict_torch_load
