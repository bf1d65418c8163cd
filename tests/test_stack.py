"""The installed stack: toolkits with mmcv ops, registration, tools, safe checkpoints."""
import os
import os.path as osp
import pickle
import re
import subprocess
import sys

import pytest
import torch

from helpers import CONFIGS, HANG_TIMEOUT, REPO, current_stack, run_tool, write_config
from det_tiny import tiny_det_config

MASK_RCNN = osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_1x_coco.py')


def test_toolkits_import_with_compiled_mmcv_ops():
    from importlib import metadata

    from mmcv.ops import RoIAlign, nms
    from mmevt.stack import STACKS
    # the versions requirements/<stack>.txt pins, which mmevt.stack lists as tested
    for dist, version in STACKS[current_stack()].tested.items():
        assert metadata.version(dist) == version, dist
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.], [20., 20., 30., 30.]])
    dets, keep = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), iou_threshold=0.5)
    assert keep.tolist() == [0, 2]
    feats = torch.arange(16.).view(1, 1, 4, 4)
    out = RoIAlign((2, 2), 1.0, 0)(feats, torch.tensor([[0., 0., 0., 4., 4.]]))
    assert out.shape == (1, 1, 2, 2)


def test_import_registers_into_every_toolkit():
    import mmevt
    from mmdet.registry import MODELS as DET
    from mmpretrain.registry import MODELS as CLS
    from mmseg.registry import MODELS as SEG
    # mmpose and mmaction2 are on the upstream stack only (requirements/pose-upstream.txt,
    # action-upstream.txt: no fork of either); mmrotate on both (docs/rotated.md)
    expected = ['mmdet', 'mmseg', 'mmpretrain'] + (
        ['mmpose', 'mmaction'] if current_stack() == 'upstream' else []) + ['mmrotate']
    assert mmevt.REGISTERED_TOOLKITS == expected
    assert mmevt.register_all_modules() == mmevt.REGISTERED_TOOLKITS  # again: no error
    for registry in (DET, SEG, CLS):
        model = registry.build(dict(type='EVT', arch='evt-test'))
        assert isinstance(model, mmevt.EVT)
    assert CLS.get('RMTClsNeck') is mmevt.RMTClsNeck


@pytest.mark.e2e
def test_model_code_needs_only_torch_mmengine_einops():
    # Block every OpenMMLab toolkit and mmcv: the backbone must still build and run.
    code = r'''
import sys, importlib.abc, warnings
BLOCKED = ('mmcv', 'mmdet', 'mmseg', 'mmpretrain', 'mmpose', 'mmaction', 'mmrotate')
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ModuleNotFoundError(f'blocked {name}', name=name)
sys.meta_path.insert(0, Block())
import torch
with warnings.catch_warnings(record=True):
    warnings.simplefilter('always')
    import mmevt
from mmevt.models import EVT
out = EVT('evt-test')(torch.randn(1, 3, 64, 64))
assert len(out) == 4
assert not any(m.split('.')[0] in BLOCKED for m in sys.modules), sorted(sys.modules)
print('OK', mmevt.REGISTERED_TOOLKITS)
'''
    out = run_tool('-c', code)
    assert 'OK []' in out


@pytest.fixture(scope='module')
def trained_mask_rcnn(shapes_root, tmp_path_factory):
    """A tiny Mask R-CNN trained 1 epoch = 2 iterations (8 images, batch 4)."""
    tmp = tmp_path_factory.mktemp('maskrcnn')
    work = str(tmp / 'work')
    cfg = write_config(tmp / 'mask_rcnn_tiny.py', tiny_det_config(MASK_RCNN, shapes_root, work))
    log = run_tool('tools/train.py', cfg)
    return cfg, work, log


@pytest.mark.e2e
def test_mask_rcnn_trains_tests_and_resumes(trained_mask_rcnn, tmp_path):
    cfg, work, log = trained_mask_rcnn
    assert 'Epoch(train) [1][2/2]' in log and 'loss_mask' in log
    ckpt = osp.join(work, 'epoch_1.pth')
    assert osp.isfile(ckpt)
    # evaluate the saved checkpoint through tools/test.py: COCO bbox and segm metrics
    out = run_tool('tools/test.py', cfg, ckpt, '--work-dir', str(tmp_path / 'test'))
    for metric in ('coco/bbox_mAP:', 'coco/bbox_mAP_50:', 'coco/segm_mAP:'):
        assert metric in out
    # --resume continues from epoch 1 to epoch 2
    out = run_tool('tools/train.py', cfg, '--resume', '--cfg-options',
                   'train_cfg.max_epochs=2')
    assert 'resumed epoch: 1, iter: 2' in out
    assert 'Epoch(train) [2][2/2]' in out and 'Epoch(train) [1][' not in out
    assert osp.isfile(osp.join(work, 'epoch_2.pth'))


@pytest.mark.e2e
def test_runner_checkpoint_loads_with_weights_only(trained_mask_rcnn):
    _, work, _ = trained_mask_rcnn
    ckpt = osp.join(work, 'epoch_1.pth')
    load = ('import sys, torch\n'
            f'{{}}ck = torch.load({ckpt!r}, map_location="cpu", weights_only=True)\n'
            'print("LOADED", sorted(ck))')
    out = run_tool('-c', load.format('import mmevt\n'))
    assert "LOADED ['message_hub', 'meta', 'optimizer', 'param_schedulers', 'state_dict']" in out
    # without mmevt the same load fails: the allow-list is what makes it work
    proc = run_tool('-c', load.format(''), check=False)
    assert proc.returncode != 0 and 'Weights only load failed' in proc.stdout


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f'touch {self.path}', ))


def test_malicious_checkpoint_is_refused(tmp_path):
    import mmevt  # noqa: F401
    from mmengine.runner import load_checkpoint
    marker = tmp_path / 'pwned'
    bad = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'meta': _Evil(str(marker))}, bad)
    with pytest.raises(pickle.UnpicklingError, match=r'unsupported GLOBAL posix.system'):
        torch.load(bad, map_location='cpu')
    with pytest.raises(pickle.UnpicklingError, match='Weights only load failed'):
        load_checkpoint(torch.nn.Linear(1, 1), str(bad), map_location='cpu')
    assert not marker.exists()


def test_checkpoint_getattr_is_restricted(tmp_path):
    import mmevt  # noqa: F401
    from mmengine.logging import HistoryBuffer

    class _EvilGetattr:
        def __reduce__(self):
            return (getattr, (HistoryBuffer, '__init__'))

    bad = tmp_path / 'getattr.pth'
    torch.save({'x': _EvilGetattr()}, bad)
    with pytest.raises(pickle.UnpicklingError, match="getattr.*'__init__'.*only allows"):
        torch.load(bad, map_location='cpu')


@pytest.mark.e2e
def test_tools_pick_the_toolkit_from_default_scope(tmp_path):
    from mmevt.apis import toolkit_of
    assert toolkit_of(MASK_RCNN) == 'mmdet'
    bad = write_config(tmp_path / 'bad.py', "default_scope = 'mmocr'\n")
    with pytest.raises(ValueError, match=r"default_scope must be one of .*got 'mmocr'"):
        toolkit_of(bad)
    with pytest.raises(FileNotFoundError, match='config file .*missing.py'):
        toolkit_of(str(tmp_path / 'missing.py'))
    out = run_tool('tools/train.py', str(tmp_path / 'missing.py'), check=False)
    assert out.returncode != 0 and 'missing.py' in out.stdout


def test_swap_names_a_config_of_another_toolkit(tmp_path):
    # the one default_scope check (mmevt.apis.launch.config_toolkit) behind every tool
    from mmevt.swap import plan_swap
    src = write_config(tmp_path / 'src.py', "default_scope = 'mmocr'\n")
    with pytest.raises(ValueError, match=r"src\.py: default_scope must be one of "
                                         r"\['mmdet', 'mmseg', 'mmpretrain', 'mmpose', "
                                         r"'mmaction', 'mmrotate'\] or "
                                         r"another installed .*got 'mmocr': mmocr is not "
                                         r"installed"):
        plan_swap(src, 'evt-t')


def test_environment_is_reused_quickly():
    # the bootstrap's second run only checks the stamp and the mmcv ops (no installs)
    env = dict(os.environ, MMEVT_VENV=osp.dirname(osp.dirname(sys.executable)),
               MMEVT_STACK=current_stack())
    proc = subprocess.run(['bash', 'tools/bootstrap.sh'], cwd=REPO, env=env, timeout=HANG_TIMEOUT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout
    assert 'installing' not in proc.stdout and 'building' not in proc.stdout


@pytest.mark.parametrize('scope,reason', [
    ('mmengine', 'mmengine is the library the toolkits build on, not a toolkit'),
    ('json', r"json\.registry does not import"),
    (None, 'not a toolkit name'),
])
def test_a_scope_that_cannot_pick_a_toolkit_says_why(scope, reason):
    from mmevt.toolkits import config_toolkit
    with pytest.raises(ValueError, match=rf"x\.py: default_scope must be one of .*got "
                                         rf"{re.escape(repr(scope))}: {reason}"):
        config_toolkit(dict(default_scope=scope), 'x.py')


# ------------------------------------------------------------------ package look-up by name
def test_package_lookup_finds_the_module_named_like_the_distribution(monkeypatch):
    import importlib.util
    from importlib import metadata
    from types import SimpleNamespace

    from mmevt.patches import config_resolution as lookup

    def where(module):
        return osp.dirname(importlib.util.find_spec(module).origin)

    # torch's distribution also installs functorch, setuptools' _distutils_hack: both sort
    # first; PyYAML's module is yaml (beside _yaml), Pillow's PIL
    assert lookup.get_installed_path('torch') == osp.dirname(torch.__file__)
    for dist, module in {'setuptools': 'setuptools', 'mmengine': 'mmengine',
                         'PyYAML': 'yaml', 'Pillow': 'PIL'}.items():
        assert lookup.get_installed_path(dist) == where(module), dist
        assert lookup.package2module(dist) == module
    # the fork's onedl-mmcv: its one package is mmcv (top_level.txt also lists build, docs)
    files = [metadata.PackagePath(p) for p in ('docs/conf.py', 'mmcv/__init__.py',
                                                'mmcv/ops/__init__.py', 'build/lib/x.py')]
    real = metadata.distribution
    monkeypatch.setattr(metadata, 'distribution', lambda name: SimpleNamespace(files=files)
                        if name == 'onedl-mmcv' else real(name))
    assert lookup.package2module('onedl-mmcv') == 'mmcv'
    assert lookup.package2module('mmsegmentation') == 'mmseg'  # MODULE2PACKAGE first
    assert lookup.package2module('no-such-toolkit') == 'no_such_toolkit'


# ------------------------------------------------------------------ mmcv and each toolkit
UPSTREAM = {'mmengine': '0.10.7', 'mmdet': '3.3.0', 'mmsegmentation': '1.2.2',
            'mmpretrain': '1.2.0', 'mmpose': '1.3.2'}
FORK = {'onedl-mmengine': '0.10.12', 'onedl-mmdetection': '3.5.1',
        'onedl-mmsegmentation': '1.4.2', 'onedl-mmpretrain': '1.3.6'}


def test_upstream_mmcv_2_2_is_accepted_naming_the_toolkits_it_leaves_out(monkeypatch):
    import warnings

    from mmevt import stack
    monkeypatch.setattr(stack, '_installed', dict(UPSTREAM, mmcv='2.2.0').get)
    assert stack.stack_problems() == []
    unavailable = stack.unavailable_toolkits()
    assert list(unavailable) == ['mmdet', 'mmseg', 'mmpose']  # mmpretrain allows < 2.4.0
    assert unavailable['mmdet'].startswith('mmdet 3.3.0 asserts mmcv>=2.0.0rc4,<2.2.0')
    assert 'mmdet 3.3.0 asserts mmcv<2.2.0' in unavailable['mmpose']  # through mmdet
    with pytest.warns(UserWarning) as caught:
        stack.check_stack()
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert str(caught[0].message).startswith(
        'mmevt: mmdet, mmseg, mmpose cannot import with mmcv 2.2.0 (EVT is not registered '
        'there): mmdet 3.3.0 asserts')
    # mmcv 2.1.0 (the tested one): every toolkit, and no warning
    monkeypatch.setattr(stack, '_installed', dict(UPSTREAM, mmcv='2.1.0').get)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        stack.check_stack()
    assert stack.unavailable_toolkits() == {} and stack.unavailable_text() == ''
    # the fork's toolkits all import with its onedl-mmcv 2.3.6
    monkeypatch.setattr(stack, '_installed', dict(FORK, **{'onedl-mmcv': '2.3.6'}).get)
    assert stack.stack_problems() == [] and stack.unavailable_toolkits() == {}


def test_an_mmcv_no_toolkit_imports_with_is_refused(monkeypatch):
    from mmevt import stack
    cases = {
        'mmcv 2.4.0 is installed; mmevt supports mmcv>=2.0.0,<2.4.0': dict(UPSTREAM,
                                                                          mmcv='2.4.0'),
        'mmcv 1.7.2 is installed; mmevt supports mmcv>=2.0.0,<2.4.0': dict(UPSTREAM,
                                                                          mmcv='1.7.2'),
        'mmengine (upstream) is installed with onedl-mmcv (fork): use one stack':
            dict(UPSTREAM, **{'onedl-mmcv': '2.3.6'}),
        'onedl-mmengine (fork) is installed with mmcv (upstream): use one stack':
            dict(FORK, mmcv='2.2.0'),
        'both mmcv 2.2.0 and onedl-mmcv 2.3.6 are installed':
            dict(UPSTREAM, mmcv='2.2.0', **{'onedl-mmcv': '2.3.6'}),
    }
    for expected, installed in cases.items():
        monkeypatch.setattr(stack, '_installed', installed.get)
        with pytest.raises(ImportError) as err:
            stack.check_stack()
        assert expected in str(err.value), str(err.value)
        assert 'onedl-mmcv>=2.2.0,<2.4.0' in str(err.value)


def test_each_stacks_mmcv_range_is_the_widest_of_its_toolkits():
    from mmevt.stack import STACKS, TOOLKIT_MMCV, _version_tuple
    from mmevt.toolkits import TOOLKITS
    for name, stack in STACKS.items():
        ranges = TOOLKIT_MMCV[name]
        assert {t.module for t in ranges} <= set(TOOLKITS)
        others = {'mmpose', 'mmaction2', 'mmrotate-dev', 'onedl-mmrotate'}
        assert {t.dist for t in ranges} <= set(stack.tested) | others
        caps = [t.high for t in ranges if t.high is not None]
        assert max(caps, key=_version_tuple) == stack.mmcv[2], name


def test_registration_skips_the_toolkits_mmcv_leaves_out(monkeypatch):
    import mmevt  # noqa: F401
    from mmevt import registry
    monkeypatch.setattr(registry, 'unavailable_toolkits',
                        lambda: {'mmseg': 'mmsegmentation 1.2.2 asserts ...', 'mmpose': '...',
                                 'mmaction': '...', 'mmrotate': '...'})
    real = registry.toolkit_models

    def mmdet_refuses(name):  # what mmdet 3.3.0's own assert does on mmcv 2.2.0
        if name == 'mmdet':
            raise AssertionError('MMCV==2.2.0 is used but incompatible. Please install '
                                 'mmcv>=2.0.0rc4, <2.2.0.')
        return real(name)

    monkeypatch.setattr(registry, 'toolkit_models', mmdet_refuses)
    with pytest.warns(UserWarning, match=r'mmdet failed to import \(MMCV==2\.2\.0 is used'):
        assert registry.register_all_modules() == ['mmpretrain']


FAKE_MMCV = r'''
import sys, warnings
from importlib import metadata
import mmcv
mmcv.__version__ = sys.argv[1]  # what the toolkits' own asserts read
real_version = metadata.version
metadata.version = lambda dist: sys.argv[1] if dist == sys.argv[2] else real_version(dist)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    import mmevt
print('REGISTERED', mmevt.REGISTERED_TOOLKITS)
print('WARNED', sum('cannot import with mmcv' in str(w.message) for w in caught))
for toolkit in ('mmdet', 'mmseg', 'mmpretrain', 'mmpose.models', 'mmrotate'):
    try:
        __import__(toolkit)
        print('IMPORTS', toolkit)
    except AssertionError as err:
        print('REFUSES', toolkit, err)
    except ImportError:  # the fork has no mmpose
        print('MISSING', toolkit)
'''


@pytest.mark.e2e
def test_import_works_on_mmcv_2_2_with_the_toolkits_that_allow_it():
    # the installed toolkits' own asserts, against mmcv's version faked to 2.2.0: the table
    # in mmevt.stack says what they do, and import mmevt works for the rest
    if current_stack() == 'fork':
        # onedl-mmcv 2.2.0, the fork's lowest: every fork toolkit accepts it, none left out
        out = run_tool('-c', FAKE_MMCV, '2.2.0', 'onedl-mmcv')
        assert "REGISTERED ['mmdet', 'mmseg', 'mmpretrain', 'mmrotate']" in out, out
        assert 'WARNED 0' in out, out
        for toolkit in ('mmdet', 'mmseg', 'mmpretrain', 'mmrotate'):
            assert f'IMPORTS {toolkit}' in out, out
        return
    out = run_tool('-c', FAKE_MMCV, '2.2.0', 'mmcv')
    assert "REGISTERED ['mmpretrain']" in out and 'WARNED 1' in out, out
    for toolkit in ('mmdet', 'mmseg', 'mmpose.models'):
        assert f'REFUSES {toolkit} MMCV==2.2.0 is used but incompatible' in out, out
    assert 'IMPORTS mmpretrain' in out, out
    # mmrotate-dev imports mmdet before its own assert (mmcv <= 2.1.0): mmdet's refuses first
    assert 'REFUSES mmrotate MMCV==2.2.0 is used but incompatible' in out, out
