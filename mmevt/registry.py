"""Register mmevt's modules into the OpenMMLab toolkits' registries.

Each toolkit is optional: a machine with only torch and mmengine still builds the backbone
from mmengine's root ``MODELS`` registry (or directly from the class).
"""
import importlib
import warnings
from typing import Dict, List

from mmengine.registry import MODELS as MMENGINE_MODELS

from .models import EVT, RMTClsNeck
from .models.layers import (BiLevelRoutingAttention, ExternalAttention,
                            SpatialDecayAttention)

TOOLKITS = ('mmpretrain', 'mmdet', 'mmseg')
MODULES: Dict[str, type] = {
    'EVT': EVT,
    'RMTClsNeck': RMTClsNeck,
    'SpatialDecayAttention': SpatialDecayAttention,
    'ExternalAttention': ExternalAttention,
    'BiLevelRoutingAttention': BiLevelRoutingAttention,
}


def register_all_modules() -> List[str]:
    """Register :data:`MODULES` into mmengine's root and each importable toolkit's
    ``MODELS``.

    Returns:
        list[str]: the toolkits registered into.
    """
    registries = [MMENGINE_MODELS]
    done = []
    for name in TOOLKITS:
        try:
            registries.append(importlib.import_module(f'{name}.registry').MODELS)
            done.append(name)
        except ImportError as err:
            if getattr(err, 'name', None) != name:  # installed but broken (e.g. no mmcv ops)
                warnings.warn(f'mmevt: {name} failed to import ({err}); EVT is not '
                              f'registered for {name}')
    for registry in registries:
        for module_name, cls in MODULES.items():
            registry.register_module(name=module_name, module=cls, force=True)
    if 'mmpretrain' in done:
        from mmpretrain.registry import METRICS

        from .evaluation import SubsetAccuracy
        METRICS.register_module(name='SubsetAccuracy', module=SubsetAccuracy, force=True)
    return done
