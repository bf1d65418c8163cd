"""Register mmevt's modules into the OpenMMLab toolkits' registries.

Each toolkit is optional: a machine with only torch and mmengine still builds the backbone
from mmengine's root ``MODELS`` registry (or directly from the class). Registration is
idempotent (importing twice, or reloading mmevt, is fine), but a name another package has
already registered with its own class (another ``EVT``) is an error, not a silent override.
"""
import importlib
import warnings
from typing import Dict, List, Mapping

from mmengine.registry import HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import Registry

from .stack import unavailable_toolkits
from .toolkits import TOOLKITS, get_toolkit, toolkit_models
from .engine import EVTLayerDecayOptimWrapperConstructor, PreemptionCheckpointHook
from .engine.optimizers import RenamedLayerDecayOptimWrapperConstructor
from .models import EVT, RMTClsNeck, RMTTokenLabelClsHead
from .models.layers import (BiLevelRoutingAttention, ExternalAttention,
                            SpatialDecayAttention)

MODULES: Dict[str, type] = {
    'EVT': EVT,
    'RMTClsNeck': RMTClsNeck,
    'RMTTokenLabelClsHead': RMTTokenLabelClsHead,
    'SpatialDecayAttention': SpatialDecayAttention,
    'ExternalAttention': ExternalAttention,
    'BiLevelRoutingAttention': BiLevelRoutingAttention,
}


def _same_class(a: type, b: type) -> bool:
    # a reloaded module defines a new class object under the same qualified name
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def register_modules(registry: Registry, modules: Mapping[str, type] = MODULES) -> None:
    """Register ``modules`` (name -> class) into ``registry``.

    Registering the same class again is a no-op; a name already taken by another class is
    an error naming both, so two packages' ``EVT`` never silently replace each other.

    Raises:
        RuntimeError: a name is registered to a class that is not mmevt's.
    """
    for name, cls in modules.items():
        existing = registry.module_dict.get(name)
        if existing is not None and not _same_class(existing, cls):
            raise RuntimeError(
                f'mmevt cannot register {name!r} in the {registry.name!r} registry (scope '
                f'{registry.scope!r}): {existing.__module__}.{existing.__qualname__} is '
                f'already registered under that name. Two installed packages define '
                f'{name!r}; uninstall one, or register that one under another name.')
        registry.register_module(name=name, module=cls, force=existing is not None)


def register_all_modules() -> List[str]:
    """Register :data:`MODULES` into mmengine's root and each importable toolkit's
    ``MODELS``, but for those the installed mmcv leaves unavailable
    (:func:`mmevt.stack.unavailable_toolkits`).

    Returns:
        list[str]: the toolkits registered into.
    """
    registries = [MMENGINE_MODELS]
    done = []
    # the installed mmcv is outside their range (mmdet 3.3.0 on mmcv 2.2): not imported;
    # mmevt.stack.check_stack has warned
    unavailable = unavailable_toolkits()
    for name in TOOLKITS:
        if name in unavailable:
            continue
        try:
            registries.append(toolkit_models(name))
            done.append(name)
        except (ImportError, AssertionError) as err:
            # installed but broken (e.g. no mmcv ops), or its own version assert refuses
            if isinstance(err, AssertionError) or getattr(err, 'name', None) != name:
                warnings.warn(f'mmevt: {name} failed to import ({err}); EVT is not '
                              f'registered for {name}')
    for registry in registries:
        register_modules(registry)
    # mmengine's registry is the parent of mmdet's / mmseg's / mmpretrain's: one entry
    # serves every toolkit's configs. The name says EVT: mmpose 1.3.2 registers its own
    # LayerDecayOptimWrapperConstructor (ViT layer ids) there, with force=True
    register_modules(OPTIM_WRAPPER_CONSTRUCTORS, {
        'EVTLayerDecayOptimWrapperConstructor': EVTLayerDecayOptimWrapperConstructor})
    if OPTIM_WRAPPER_CONSTRUCTORS.get('LayerDecayOptimWrapperConstructor') is None:
        register_modules(OPTIM_WRAPPER_CONSTRUCTORS, {  # the old name, while it is free
            'LayerDecayOptimWrapperConstructor': RenamedLayerDecayOptimWrapperConstructor})
    # any config's custom_hooks, whatever its toolkit (their HOOKS are children of this one)
    register_modules(HOOKS, {'PreemptionCheckpointHook': PreemptionCheckpointHook})
    for name in done:  # mmevt's metrics, into the toolkits they are for
        metrics = get_toolkit(name).metrics
        if metrics:
            from . import evaluation  # imports the toolkit: only where it is registered
            register_modules(importlib.import_module(f'{name}.registry').METRICS,
                             {m: getattr(evaluation, m) for m in metrics})
    return done
