"""How mmengine resolves ``pkg::path`` configs (``_base_ = 'mmdet::...'``, ``mmevt::...``).

Three changes, each applied by ``import mmevt`` (:mod:`mmevt.patches`):

- :func:`enable_config_prefix`: ``mmevt::`` is a known package (mmengine resolves ``pkg::``
  only for the modules in ``mmengine.config.utils.MODULE2PACKAGE``).
- :func:`enable_package_lookup`: mmengine's ``is_installed`` / ``get_installed_path`` without
  ``pkg_resources`` and for the fork's distribution names. Upstream mmengine 0.10.7 imports
  ``pkg_resources`` in both, which setuptools >= 82 no longer ships, so no ``pkg::`` config
  parses there; the fork's versions use ``importlib.metadata`` but look up the distribution
  ``MODULE2PACKAGE`` names (``mmseg`` -> ``mmsegmentation``), while the fork's is
  ``onedl-mmsegmentation``, so ``mmseg::`` fails there.
- :func:`enable_config_index_cache`: each toolkit's metafiles read once per process instead of
  for every ``pkg::`` base of every config parsed.
"""
import functools
import importlib.machinery
import importlib.util
import os.path as osp
from typing import Dict, Optional

PACKAGE = 'mmevt'


def enable_config_prefix() -> None:
    """Let mmengine resolve ``mmevt::<path>`` config paths.

    mmengine resolves ``pkg::`` only for packages listed in
    ``mmengine.config.utils.MODULE2PACKAGE`` (module -> pip distribution name), then reads
    ``<installed pkg>/.mim/configs/<path>``. Only an installed wheel has that directory (an
    editable install's package is the checkout, where setup.py writes no ``.mim``).
    """
    from mmengine.config.utils import MODULE2PACKAGE
    MODULE2PACKAGE.setdefault(PACKAGE, PACKAGE)


# ------------------------------------------------------------------------ package look-up
def _module_name(package: str) -> str:
    """The importable module of ``package``, a distribution or module name.

    In this order: ``MODULE2PACKAGE``'s names (``mmsegmentation`` -> ``mmseg``, whichever
    distribution provides ``mmseg``: upstream's or the fork's ``onedl-mmsegmentation``); the
    module named like the distribution, where the distribution's files have it (``torch``,
    not its ``functorch``; ``setuptools``, not its ``_distutils_hack``); the distribution's
    only or first public package (``onedl-mmcv`` -> ``mmcv``: its files, since its
    ``top_level.txt`` also lists ``build`` and ``docs``; ``PyYAML`` -> ``yaml``, not
    ``_yaml``); else the name itself, ``-`` read as ``_``.
    """
    from importlib import metadata

    from mmengine.config.utils import MODULE2PACKAGE
    for module, dist in MODULE2PACKAGE.items():
        if dist == package:
            return module
    try:
        files = metadata.distribution(package).files or []
    except metadata.PackageNotFoundError:
        files = []
    packages = sorted({f.parts[0] for f in files
                       if len(f.parts) == 2 and f.name == '__init__.py'})
    own = package.replace('-', '_')
    for name in (own, own.lower()):
        if name in packages:
            return name
    # private helpers (``_yaml``, ``_distutils_hack``) sort first but are not what it provides
    public = [name for name in packages if not name.startswith('_')]
    return (public or packages or [own])[0]


def _module_spec(package: str) -> Optional[importlib.machinery.ModuleSpec]:
    try:
        return importlib.util.find_spec(_module_name(package))
    except (ImportError, ValueError):
        return None


def is_installed(package: str) -> bool:
    """Whether ``package`` (a distribution or module name) can be imported.

    mmengine's ``is_installed``, answered from the module that would be imported rather than
    from ``pkg_resources``' distribution records.
    """
    spec = _module_spec(package)
    return spec is not None and spec.origin is not None


def get_installed_path(package: str) -> str:
    """The directory of the module ``package`` imports as (e.g. ``.../site-packages/mmseg``).

    mmengine's ``get_installed_path``: the module's location as Python imports it, so a
    package earlier on ``sys.path`` (``PYTHONPATH``, ``pip install --target``) wins, as it
    does at import.

    Raises:
        ImportError: nothing of that name is importable.
        RuntimeError: it is a namespace package (no single directory).
    """
    spec = _module_spec(package)
    if spec is None:
        raise ImportError(f'{package} is not installed (no importable module '
                          f'{_module_name(package)!r})', name=package)
    if spec.origin is None:
        raise RuntimeError(f'{package} is a namespace package, which is invalid for '
                           '`get_installed_path`')
    return osp.dirname(spec.origin)


def package2module(package: str) -> str:
    """mmengine's ``package2module``: the module name of a distribution."""
    return _module_name(package)


# where mmengine keeps (or imported) these functions; every binding is replaced
PACKAGE_LOOKUP_TARGETS = {
    'mmengine.utils.package_utils': ('is_installed', 'get_installed_path', 'package2module'),
    'mmengine.utils': ('is_installed', 'get_installed_path'),
    'mmengine.config.config': ('is_installed', 'get_installed_path'),
    'mmengine.hub.hub': ('get_installed_path', ),
}


def enable_package_lookup() -> None:
    """Replace mmengine's package look-up (see the module docstring). Idempotent."""
    ours = dict(is_installed=is_installed, get_installed_path=get_installed_path,
                package2module=package2module)
    for module_name, names in PACKAGE_LOOKUP_TARGETS.items():
        module = importlib.import_module(module_name)
        for name in names:
            if hasattr(module, name):
                setattr(module, name, ours[name])


# --------------------------------------------------------------------- config index cache
@functools.lru_cache(maxsize=None)
def _config_index(package_path: str) -> Dict[str, dict]:
    """Config name -> model entry over every metafile of ``<package_path>/.mim``, read once.

    The same index mmengine 0.10's ``config.utils._get_cfg_metainfo`` builds (entries
    without ``Config`` skipped, the first weight of a config kept), which it rebuilds for
    every ``pkg::`` base of every config it parses.
    """
    from mmengine.fileio import load
    index = load(osp.join(package_path, '.mim', 'model-index.yml'))
    configs: Dict[str, dict] = {}
    for meta in index['Import']:
        for model in load(osp.join(package_path, '.mim', meta))['Models']:
            if 'Config' in model:
                configs.setdefault(model['Config'].partition('/')[-1], model)
    return configs


def _cached_cfg_metainfo(package_path: str, cfg_path: str) -> dict:
    """``_get_cfg_metainfo`` over :func:`_config_index` (same result, same ``ValueError``)."""
    configs = _config_index(package_path)
    if cfg_path not in configs:
        raise ValueError(f'Expected configs: {configs.keys()}, but got {cfg_path}')
    return configs[cfg_path]


def enable_config_index_cache() -> None:
    """Read each toolkit's metafiles once per process when resolving ``pkg::`` bases.

    mmengine 0.10 looks every ``mmdet::`` / ``mmseg::`` / ``mmpretrain::`` base up in the
    package's model index first (several hundred YAML files for mmdet) and only then falls
    back to ``.mim/configs/<path>``; that look-up is most of the time ``Config.fromfile``
    takes for a config with such bases. The metafiles of an installed package do not change
    while a process runs, so the index is cached; the answer, and the ``ValueError`` that
    makes mmengine fall back, are unchanged. A no-op when mmengine has no such function.
    """
    from mmengine.config import utils
    original = getattr(utils, '_get_cfg_metainfo', None)
    if callable(original) and original is not _cached_cfg_metainfo:
        _cached_cfg_metainfo.__wrapped__ = original  # what it stands for (tests compare)
        utils._get_cfg_metainfo = _cached_cfg_metainfo
