"""mmevt: EVT backbones (Euclidean spatial decay attention with 1D token grouping) for
OpenMMLab 2.x, on the upstream OpenMMLab stack or the onedl fork.

Importing it checks the installed stack (:mod:`mmevt.stack`), registers the modules into
mmpretrain, mmdet and mmseg, applies mmevt's patches of other libraries (safe checkpoint
loading, ``pkg::`` configs without ``pkg_resources``, atomic checkpoint writes, ...: the
table in :mod:`mmevt.patches`, printed by ``python -m mmevt.info``) and registers the
classification model names with mmpretrain.
"""
from .stack import check_stack

__version__ = '0.1.0'

check_stack()  # a clear error for an mmengine / mmcv mmevt does not support

from .models import EVT, RMTClsNeck, arch_zoo  # noqa: E402
from .registry import register_all_modules  # noqa: E402

REGISTERED_TOOLKITS = register_all_modules()

from .patches import apply_import_patches  # noqa: E402

apply_import_patches()

from .hub import register_model_names  # noqa: E402

MODEL_NAMES = register_model_names()  # mmpretrain.get_model('evt-t_8xb128_in1k') etc.

__all__ = ['EVT', 'RMTClsNeck', 'arch_zoo', 'register_all_modules', '__version__']
