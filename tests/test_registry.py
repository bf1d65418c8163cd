"""Registration: idempotent, yet a real name collision with another package is reported."""
import os.path as osp

import pytest
from mmengine.registry import Registry

from mmevt.models import EVT
from mmevt.registry import MODULES, register_modules
from mmevt.toolkits import TOOLKITS

from helpers import REPO


def test_registering_twice_is_a_no_op():
    registry = Registry('models of a test')
    register_modules(registry)
    register_modules(registry)
    assert registry.get('EVT') is EVT and set(registry.module_dict) == set(MODULES)


def test_a_reloaded_mmevt_class_replaces_the_old_one():
    registry = Registry('models of a test')
    register_modules(registry)
    reloaded = type('EVT', (EVT, ), {'__module__': EVT.__module__, '__qualname__': 'EVT'})
    register_modules(registry, {'EVT': reloaded})
    assert registry.get('EVT') is reloaded


def test_another_packages_evt_is_reported_not_overridden():
    class OtherEVT:  # e.g. another project's backbone registered as 'EVT'
        pass

    registry = Registry('models of a test')
    registry.register_module(name='EVT', module=OtherEVT)
    with pytest.raises(RuntimeError, match=r"cannot register 'EVT' .*test_registry\..*OtherEVT "
                                           r'is already registered under that name'):
        register_modules(registry)
    assert registry.get('EVT') is OtherEVT


def test_one_list_of_toolkits():
    assert set(TOOLKITS) == {'mmdet', 'mmseg', 'mmpretrain', 'mmpose', 'mmaction',
                             'mmrotate'}


@pytest.mark.parametrize('scope', TOOLKITS)
def test_each_toolkits_module_names_what_the_repository_holds_for_it(scope):
    # docs/extending.md's "A new toolkit": its module, configs, requirement lines, docs page
    import mmevt.datasets
    from mmevt.stack import STACKS, TOOLKIT_MMCV
    from mmevt.toolkits import TOOLKIT_TABLE
    kit = TOOLKIT_TABLE[scope]
    assert type(kit).__module__ == f'mmevt.toolkits.{scope}' and kit.scope == scope
    assert osp.isdir(osp.join(REPO, 'configs', kit.configs))
    assert osp.isfile(osp.join(REPO, 'docs', f'{kit.docs}.md'))
    assert callable(getattr(mmevt.datasets, kit.demo_data))
    for stack in STACKS:
        dists = [r.dist for r in TOOLKIT_MMCV[stack] if r.module == scope]
        if stack not in kit.requirements:
            assert dists == [], (stack, dists)  # a stack without it has no mmcv range of it
            continue
        with open(osp.join(REPO, kit.requirements[stack])) as f:
            names = {line.split('=')[0].strip() for line in f if not line.startswith('#')}
        assert len(dists) == 1 and dists[0] in names, (stack, dists)
    assert kit.package == [r.dist for r in TOOLKIT_MMCV['upstream'] if r.module == scope][0]


COEXIST = '''
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS as constructors
for name in ('EVTLayerDecayOptimWrapperConstructor', 'LayerDecayOptimWrapperConstructor'):
    print(getattr(constructors.get(name), '__module__', None))
'''


@pytest.mark.e2e
def test_mmposes_layer_decay_and_ours_coexist_in_either_import_order():
    # mmpose 1.3.2 registers its LayerDecayOptimWrapperConstructor into mmengine's root
    # registry with force=True; ours has its own name there, so neither replaces the other
    import importlib.util

    from helpers import current_stack, run_tool
    ours = 'mmevt.engine.optimizers'
    if importlib.util.find_spec('mmpose') is None:
        assert current_stack() == 'fork'  # the fork stack has no mmpose (docs/pose.md)
        # the old name, free here, is our class's deprecated alias
        assert run_tool('-c', COEXIST, 'mmevt').split()[-2:] == [ours, ours]
        return
    for order in (('mmevt', 'mmpose.engine'), ('mmpose.engine', 'mmevt')):
        assert run_tool('-c', COEXIST, *order).split()[-2:] == [
            ours, 'mmpose.engine.optim_wrappers.layer_decay_optim_wrapper']


def test_the_old_layer_decay_name_still_builds_ours_and_warns():
    import mmevt  # noqa: F401
    from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS

    from mmevt.engine import EVTLayerDecayOptimWrapperConstructor
    old = OPTIM_WRAPPER_CONSTRUCTORS.get('LayerDecayOptimWrapperConstructor')
    if old.__module__ != 'mmevt.engine.optimizers':  # mmpose's, imported by another test
        assert old.__module__.startswith('mmpose.')
        return
    assert issubclass(old, EVTLayerDecayOptimWrapperConstructor)
    with pytest.warns(FutureWarning, match="write 'EVTLayerDecayOptimWrapperConstructor'"):
        old(dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4)),
            dict(layer_decay_rate=0.9))
