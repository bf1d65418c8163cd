"""mmevt's stand-in for ``mmaction.models.localizers.drn.drn``, missing from mmaction2 1.2.0.

mmaction2 1.2.0's ``mmaction/models/localizers/__init__.py`` imports ``DRN`` from here, but
neither its wheel nor its sdist holds the ``drn`` package (open-mmlab/mmaction2#2714), so
``import mmaction.models`` fails and no mmaction2 model builds. mmevt's wheel of it
(``mmaction2 1.2.0+mmevt1``: ``tools/build_mmaction2_wheel.py``, ``mmevt.patches.PATCHES``
'mmaction2-drn-stub') adds this module: ``DRN`` is registered, so every other model imports
and builds, and building ``DRN`` raises, saying why.
"""
from torch import nn

from mmaction.registry import MODELS

ISSUE = 'https://github.com/open-mmlab/mmaction2/issues/2714'


@MODELS.register_module()
class DRN(nn.Module):
    """Not available in mmaction2 1.2.0 as released; building it raises."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError(
            'DRN (temporal grounding) is not in mmaction2 1.2.0 as released: its modules are '
            f'missing from both its wheel and its sdist ({ISSUE}). This is mmevt\'s stand-in '
            '(mmaction2 1.2.0+mmevt1), which lets the other models import; for DRN, install '
            'mmaction2 from its source repository.')
