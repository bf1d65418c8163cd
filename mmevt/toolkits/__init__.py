"""The OpenMMLab toolkits mmevt serves: one module each, and the one interface the shared
code calls (:class:`~mmevt.toolkits.base.Toolkit`).

A config names its toolkit by ``default_scope``; :func:`config_toolkit` checks it and
:func:`get_toolkit` gives what mmevt knows and does for it (its module's ``TOOLKIT``, or the
base :class:`Toolkit` for another OpenMMLab 2.x toolkit). :mod:`mmevt.registry` registers EVT
into each toolkit of :data:`TOOLKITS`; ``docs/extending.md`` ("A new toolkit") lists what a
new one needs.

The modules: :mod:`.base` (the interface), :mod:`.build` (``load_config``, ``build_model``,
``toolkit_scope``), :mod:`.config_values` (config values as plain containers, the training
pipelines), and one per toolkit: :mod:`.mmdet`, :mod:`.mmseg`, :mod:`.mmpretrain`,
:mod:`.mmpose`, :mod:`.mmaction`, :mod:`.mmrotate`.
"""
import importlib
import importlib.util
from typing import Any, Dict, Mapping, Optional

from . import mmaction, mmdet, mmpose, mmpretrain, mmrotate, mmseg
from .base import Toolkit
from .build import build_model, load_config, toolkit_models, toolkit_scope

# The toolkits mmevt registers EVT into, configures and tests, in this order. Probe sides are
# multiples of 32 (every stride up to 32 divides them, so output sizes give strides exactly);
# FLOP shapes are the sizes the papers quote (each module says which).
TOOLKIT_TABLE: Dict[str, Toolkit] = {
    module.TOOLKIT.scope: module.TOOLKIT
    for module in (mmdet, mmseg, mmpretrain, mmpose, mmaction, mmrotate)
}
TOOLKITS = tuple(TOOLKIT_TABLE)

__all__ = ['TOOLKITS', 'TOOLKIT_TABLE', 'Toolkit', 'build_model', 'config_toolkit',
           'get_toolkit', 'load_config', 'toolkit_models', 'toolkit_scope']


def get_toolkit(scope: str) -> Toolkit:
    """What mmevt knows and does for the toolkit ``scope``: its :data:`TOOLKIT_TABLE` entry,
    else the base :class:`Toolkit` (another OpenMMLab 2.x toolkit)."""
    return TOOLKIT_TABLE.get(scope) or Toolkit(scope)


def _scope_problem(scope: Any) -> Optional[str]:
    """Why ``scope`` cannot pick a toolkit, or None if it can: an installed package with a
    ``registry.MODELS`` that sees EVT (a child of mmengine's root ``MODELS``)."""
    if not isinstance(scope, str) or not scope.isidentifier():
        return 'not a toolkit name'
    if scope == 'mmengine':
        return 'mmengine is the library the toolkits build on, not a toolkit'
    if importlib.util.find_spec(scope) is None:
        return f'{scope} is not installed'
    try:
        models = getattr(importlib.import_module(f'{scope}.registry'), 'MODELS', None)
    except (ImportError, AssertionError) as err:  # AssertionError: its own mmcv check
        return f'{scope}.registry does not import ({err})'
    if models is None:
        return f'{scope}.registry has no MODELS registry'
    if models.get('EVT') is None:
        return f"{scope}'s MODELS registry does not see EVT (not a child of mmengine's root)"
    return None


def config_toolkit(cfg: Mapping, name: str) -> str:
    """The toolkit owning the loaded config ``cfg`` (its ``default_scope``): one of
    :data:`TOOLKITS`, or another installed OpenMMLab 2.x toolkit whose ``MODELS`` registry
    sees EVT.

    Args:
        cfg (mmengine.Config): the loaded config.
        name (str): what to call the config in the error (its path, usually).

    Raises:
        ValueError: the scope cannot pick a toolkit (not installed, no ``MODELS`` registry,
            or one that does not see EVT); the message says which.
    """
    import mmevt  # noqa: F401  EVT registered, so the registry check below can see it
    scope = cfg.get('default_scope')
    problem = _scope_problem(scope)
    if problem is not None:
        raise ValueError(f'{name}: default_scope must be one of {list(TOOLKITS)} or another '
                         "installed OpenMMLab 2.x toolkit whose MODELS registry sees EVT, to "
                         f'pick a toolkit, got {scope!r}: {problem}')
    return scope
