"""pytest plugin that runs timm's own ``tests/test_models.py`` on mmevt's timm models.

Loaded with ``-p plugin`` (``tests/test_timm_suite.py`` runs it, ``docs/timm.md``): it
registers the models (``import mmevt.timm``) before timm's file is collected, keeps the
tests parametrized with our names and deselects every other, and lists what it left out
of ours and why. Nothing of timm is copied: its file comes from timm's sdist.

``MMEVT_TIMM_SUITE_NAMES`` (comma-separated timm names) chooses the models (default: the
three tiny ones, one per family; every name works, the larger ones take longer).
"""
import os
from typing import Dict, List

import pytest

import mmevt.timm  # noqa: F401  (the registration, before timm's file is collected)
from mmevt.timm import TIMM_NAMES

# one per family: conv stem + RMT neck, Swin patch stem + final norm, decomposed MaSA + RoPE
DEFAULT_NAMES = ('evt_tiny', 'evt_swin_tiny', 'rmt_tiny')
NAMES = tuple(n for n in os.environ.get('MMEVT_TIMM_SUITE_NAMES', ','.join(DEFAULT_NAMES))
              .split(',') if n)
# tests of timm's file parametrized with our names that do not apply, and why
NOT_APPLICABLE: Dict[str, str] = {
    'test_model_forward_torchscript': 'TorchScript: EVT is not scriptable (torch.jit.script '
    "stops at einops' rearrange(tensor, pattern, **axes_lengths): NotSupportedError; timm "
    'leaves such models out too, EXCLUDE_JIT_FILTERS); torch.export / torch.compile are '
    'the paths mmevt supports (docs/deployment.md)',
    'test_model_forward_fx_torchscript': 'the FX graph is scripted (TorchScript, as above)',
}


def pytest_configure(config: pytest.Config) -> None:
    unknown = sorted(set(NAMES) - set(TIMM_NAMES))
    if unknown:
        raise pytest.UsageError(f'MMEVT_TIMM_SUITE_NAMES has {unknown}, not timm names of '
                                f'mmevt; choose from {sorted(TIMM_NAMES)}')
    config.mmevt_not_applicable = []


def _model_name(item: pytest.Item) -> str:
    callspec = getattr(item, 'callspec', None)
    return callspec.params.get('model_name', '') if callspec is not None else ''


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        name, test = _model_name(item), item.originalname
        if item.module.__name__ != 'test_models':  # our own file (evt_checks.py)
            keep.append(item)
        elif name not in TIMM_NAMES:
            drop.append(item)
        elif name not in NAMES:
            drop.append(item)
        elif test in NOT_APPLICABLE:
            drop.append(item)
            config.mmevt_not_applicable.append((item.nodeid, NOT_APPLICABLE[test]))
        else:
            keep.append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    terminalreporter.section('mmevt: tests of timm left out for our models')
    for nodeid, why in config.mmevt_not_applicable:
        terminalreporter.line(f'NOT APPLICABLE {nodeid}: {why}')
