"""EVT, EVT-Swin and RMT as timm models: ``import mmevt.timm`` registers them with timm.

After the import, ``timm.create_model('evt_tiny')`` (and every name of :data:`TIMM_NAMES`)
builds :class:`EVTClassifier`, which holds mmevt's own :class:`~mmevt.models.EVT` backbone:
the timm path and the toolkits' path run the same modules and the same attention. The
names are listed by ``timm.list_models('evt*')`` / ``('rmt*')`` from this import on, never
before; ``import mmevt`` alone does not import timm (see ``docs/timm.md``).

Needs timm >= 1.0 (``pip install "mmevt[timm]"``); without it this import raises
``ImportError`` and the rest of mmevt works as before.
"""
import re

try:
    import timm
except ImportError as err:  # mmevt itself never needs timm
    raise ImportError('mmevt.timm registers EVT with timm, which is not installed: '
                      'pip install "mmevt[timm]" (timm >= 1.0)') from err

MIN_TIMM = (1, 0)


def _release(version: str) -> tuple:
    """``'1.0.31'`` -> ``(1, 0, 31)``; pre-release and local parts are ignored."""
    return tuple(int(p) for p in re.findall(r'\d+', version.split('+')[0])[:3])


if _release(timm.__version__) < MIN_TIMM:
    raise ImportError(f'mmevt.timm needs timm >= {".".join(map(str, MIN_TIMM))} '
                      f'(forward_intermediates, the device / dtype factory arguments), found '
                      f'{timm.__version__}: pip install "mmevt[timm]"')

from .evt import (TIMM_NAMES, EVTClassifier, checkpoint_filter_fn,  # noqa: E402
                  default_cfg, timm_name)

__all__ = ['EVTClassifier', 'TIMM_NAMES', 'checkpoint_filter_fn', 'default_cfg',
           'timm_name']
