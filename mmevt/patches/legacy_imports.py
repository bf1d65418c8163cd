"""A stand-in for ``pkg_resources`` while a toolkit script that imports it is loaded.

mmpretrain 1.2.0's ``tools/visualization/vis_cam.py`` imports ``pkg_resources`` at the top
(for ``get_distribution('grad_cam').version``), which setuptools >= 82 no longer ships; our
``tools/visualization/vis_cam.py`` loads that script as a module. Only for that load, and
only where no real ``pkg_resources`` exists, ``import pkg_resources`` gives a module with
``get_distribution`` answered by ``importlib.metadata``; it is removed from ``sys.modules``
afterwards (the script keeps its reference), so nothing else in the process sees it.
"""
import contextlib
import importlib.util
import sys
import types
from importlib import metadata
from typing import Iterator


def _get_distribution(name: str) -> types.SimpleNamespace:
    """``pkg_resources.get_distribution(name)``: the installed version (``.version``)."""
    return types.SimpleNamespace(project_name=name, version=metadata.version(name))


@contextlib.contextmanager
def pkg_resources_standin() -> Iterator[None]:
    """While the block runs, ``import pkg_resources`` finds the stand-in (see above)."""
    if importlib.util.find_spec('pkg_resources') is not None:
        yield  # a real one: used as it is
        return
    standin = types.ModuleType('pkg_resources', 'mmevt stand-in: get_distribution only')
    standin.get_distribution = _get_distribution
    sys.modules['pkg_resources'] = standin
    try:
        yield
    finally:
        if sys.modules.get('pkg_resources') is standin:
            del sys.modules['pkg_resources']
