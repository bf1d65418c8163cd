"""The environments users have: a current setuptools (no ``pkg_resources``), the onedl fork
as a second stack, a plain ``pip install``; and checkpoints refused on both stacks."""
import json
import os
import os.path as osp
import pickle
import re
import shutil
import subprocess
import sys
from importlib import metadata

import pytest
import torch

from helpers import (BLOCK_PKG_RESOURCES, CONFIGS, COPY_SKIP, HANG_TIMEOUT, REPO, RunsCode,
                     bootstrap_wheel, current_stack, run_tool)

MASK_RCNN = osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_1x_coco.py')
UPERNET = osp.join(CONFIGS, 'seg', 'upernet', 'upernet_evt-t_8xb2-160k_ade20k-512x512.py')
CLASSIFIER = osp.join(CONFIGS, 'cls', 'evt', 'evt-t_8xb128_in1k.py')


# ------------------------------------------------------------------ the runtime environment
def test_runtime_venv_has_a_current_setuptools_without_pkg_resources():
    import importlib.util
    major = int(metadata.version('setuptools').split('.')[0])
    assert major >= 82, metadata.version('setuptools')
    assert importlib.util.find_spec('pkg_resources') is None


def test_pip_check_is_clean_but_for_mmdeploys_own_pins():
    proc = subprocess.run([sys.executable, '-m', 'pip', 'check'], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=HANG_TIMEOUT)
    # mmdeploy 1.3.1 is installed --no-deps (requirements/no-deps.txt): its protobuf<=3.20.2
    # conflicts with onnx / onnxruntime, grpcio and multiprocess are for backends not used;
    # on the fork its `mmengine` is provided by onedl-mmengine under another name
    pins = 'protobuf|grpcio|multiprocess' + ('|mmengine' if current_stack() == 'fork' else '')
    # on upstream, mmpose 1.3.2 (--no-deps, requirements/pose-upstream.txt) asks for chumpy,
    # which does not build and which it never imports; xtcocotools lists its build-only
    # Cython; mmaction2 (--no-deps, requirements/action-upstream.txt) asks for
    # opencv-contrib-python, a second distribution of cv2 beside the stack's opencv-python;
    # decord 0.6.0's WHEEL file says cp36-cp36m (its file name py3-none): it works here
    allowed = re.compile(rf'mmdeploy 1\.3\.1 (has requirement|requires) ({pins})\b'
                         r'|mmpose 1\.3\.2 requires chumpy\b|xtcocotools 1\.14\.3 requires cython\b'
                         r'|mmaction2 1\.2\.0\+mmevt1 requires opencv-contrib-python\b'
                         r'|decord 0\.6\.0 is not supported on this platform$')
    problems = [line for line in proc.stdout.splitlines()
                if line.strip() and 'No broken requirements' not in line
                and not allowed.match(line)]
    assert problems == [], proc.stdout


def test_pkg_resources_standin_is_scoped_to_the_block():
    # for mmpretrain 1.2.0's vis_cam.py, loaded by our tools/visualization/vis_cam.py
    import importlib.util
    from mmevt.patches.legacy_imports import pkg_resources_standin
    with pkg_resources_standin():
        import pkg_resources
        assert pkg_resources.get_distribution('grad_cam').version == metadata.version(
            'grad-cam')
    assert 'pkg_resources' not in sys.modules
    assert importlib.util.find_spec('pkg_resources') is None


PARSE = BLOCK_PKG_RESOURCES + '''
import mmevt
from mmengine.config import Config
for path in sys.argv[1:]:
    cfg = Config.fromfile(path)
    print('PARSED', cfg.default_scope, cfg.model.backbone.type)
'''


@pytest.mark.e2e
def test_configs_of_every_toolkit_parse_without_pkg_resources():
    # mmdet::, mmseg:: (on the fork: onedl-mmsegmentation) and mmpretrain:: bases
    out = run_tool('-c', PARSE, MASK_RCNN, UPERNET, CLASSIFIER)
    assert re.findall(r'PARSED (\w+) (\w+)', out) == [
        ('mmdet', 'EVT'), ('mmseg', 'EVT'), ('mmpretrain', 'EVT')], out[-3000:]


def test_package_lookup_names_the_module_for_any_distribution_name():
    import mmevt  # noqa: F401
    from mmengine.config import config as mmconfig
    from mmevt.patches import config_resolution as lookup
    assert mmconfig.get_installed_path is lookup.get_installed_path
    # the names MODULE2PACKAGE gives (upstream's distributions), on either stack
    names = {'mmsegmentation': 'mmseg', 'mmdet': 'mmdet', 'mmpretrain': 'mmpretrain'}
    if current_stack() == 'fork':  # and the fork's own distribution names
        names.update({'onedl-mmsegmentation': 'mmseg', 'onedl-mmdetection': 'mmdet',
                      'onedl-mmpretrain': 'mmpretrain', 'onedl-mmcv': 'mmcv'})
    else:
        assert not lookup.is_installed('onedl-mmsegmentation')
    for dist, module in names.items():
        assert lookup.is_installed(dist), dist
        assert osp.basename(lookup.get_installed_path(dist)) == module
    assert not lookup.is_installed('no-such-toolkit')
    with pytest.raises(ImportError, match="no-such-toolkit is not installed"):
        lookup.get_installed_path('no-such-toolkit')


# ---------------------------------------------------------------------- supported versions
def test_an_unsupported_stack_is_refused_naming_versions_and_both_stacks(monkeypatch):
    from mmevt import stack
    assert stack.stack_problems() == []  # this venv
    cases = {
        'mmengine 0.9.1 is installed; mmevt supports mmengine>=0.10.0,<0.11.0':
            {'mmengine': '0.9.1'},
        'both mmengine 0.10.7 and onedl-mmengine 0.10.12 are installed':
            {'mmengine': '0.10.7', 'onedl-mmengine': '0.10.12'},
        'onedl-mmengine (fork) is installed with mmcv (upstream): use one stack':
            {'onedl-mmengine': '0.10.12', 'mmcv': '2.1.0'},
        'onedl-mmcv 2.4.1 is installed; mmevt supports onedl-mmcv>=2.2.0,<2.4.0':
            {'onedl-mmengine': '0.10.12', 'onedl-mmcv': '2.4.1'},
    }
    for expected, installed in cases.items():
        monkeypatch.setattr(stack, '_installed', installed.get)
        with pytest.raises(ImportError) as err:
            stack.check_stack()
        assert expected in str(err.value), str(err.value)
        for supported in ('mmengine>=0.10.0,<0.11.0', 'onedl-mmengine>=0.10.8,<0.11.0'):
            assert supported in str(err.value)


def test_bootstrap_refuses_an_unknown_stack():
    env = dict(os.environ, MMEVT_STACK='mmcv-full')
    proc = subprocess.run(['bash', 'tools/bootstrap.sh'], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=HANG_TIMEOUT)
    assert proc.returncode == 2
    assert "MMEVT_STACK must be 'upstream' or 'fork', got 'mmcv-full'" in proc.stdout


def test_info_reports_the_stack_and_every_patch():
    from mmevt.patches import PATCHES
    import importlib.util
    from mmevt.stack import STACKS, TOOLKIT_MMCV
    out = run_tool('-m', 'mmevt.info')
    stack = current_stack()
    assert f'stack: {stack}' in out
    for dist, version in STACKS[stack].tested.items():
        assert f'  {dist} {version}' in out, dist
    for toolkit in TOOLKIT_MMCV[stack]:  # mmpose and mmaction2 too, where installed
        if importlib.util.find_spec(toolkit.module) is not None:
            assert f'  {toolkit.dist} {metadata.version(toolkit.dist)}' in out, toolkit.dist
            assert f"'{toolkit.module}'" in out.split('registered in:')[1].split('\n')[0]
    assert 'pkg_resources: not importable' in out
    assert len(PATCHES) >= 8
    for patch in PATCHES:
        state = 'applied' if patch.when == 'import' else f'inside {patch.when} only'
        assert f'{patch.name} [{state}] ({patch.home})' in out, patch.name


# ------------------------------------------------------------ checkpoints, on both stacks
def _real_getattr_pickle():
    from mmengine.logging import HistoryBuffer

    class _RealGetattr:
        def __reduce__(self):
            return (getattr, (HistoryBuffer, '__init__'))

    return _RealGetattr()


def _runner_like_checkpoint(path):
    """What a runner checkpoint pickles beside tensors: a message hub, numpy in meta."""
    import numpy as np
    from mmengine.logging import MessageHub
    hub = MessageHub.get_instance('mmevt-test-environments')
    hub.update_scalar('train/loss', 1.5)
    torch.save({'state_dict': {'w': torch.ones(2)}, 'message_hub': hub.state_dict(),
                'meta': {'seed': np.int64(3), 'hist': np.arange(3)}}, path)


def test_hostile_checkpoints_are_refused_and_the_allow_list_survives(tmp_path,
                                                                     safe_globals_restored):
    import mmevt  # noqa: F401
    from mmengine.runner import checkpoint
    from mmevt.patches.checkpoint_loading import (SAFE_CHECKPOINT_GLOBALS, UNSAFE_ENV,
                                                  strict_torch_load)
    # the loader in force: mmevt's local scheme; on the fork also its _safe_torch_load
    # (which would retry a refused file with weights_only=False)
    assert checkpoint.CheckpointLoader._schemes[''].__module__ == (
        'mmevt.patches.checkpoint_loading')
    if hasattr(checkpoint, 'get_torch_safe_globals'):  # the fork's own allow-list helper
        assert checkpoint._safe_torch_load is strict_torch_load
    marker = tmp_path / 'pwned'
    runs_code, real_getattr, good = (tmp_path / n for n in ('code.pth', 'getattr.pth',
                                                            'good.pth'))
    torch.save({'state_dict': {}, 'meta': RunsCode(str(marker))}, runs_code)
    torch.save({'x': _real_getattr_pickle()}, real_getattr)
    _runner_like_checkpoint(good)
    before_user = torch.serialization.get_safe_globals()
    # a user (or the fork's list) allow-lists the real getattr: mmevt's restricted one stays
    # the one in force for mmengine's loads, and the user's entry is left as it was
    torch.serialization.add_safe_globals([getattr])
    for _ in range(3):
        for bad in (runs_code, real_getattr):
            with pytest.raises(pickle.UnpicklingError, match=UNSAFE_ENV):
                checkpoint.CheckpointLoader.load_checkpoint(str(bad), map_location='cpu')
        loaded = checkpoint.CheckpointLoader.load_checkpoint(str(good), map_location='cpu')
        assert sorted(loaded) == ['message_hub', 'meta', 'state_dict']
    assert getattr in torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(before_user)
    if hasattr(checkpoint, 'get_torch_safe_globals'):
        # the fork's context removes every entry of its list on exit, mmevt's included;
        # mmengine's next load puts them back
        for _ in range(2):
            with torch.serialization.safe_globals(checkpoint.get_torch_safe_globals()):
                pass
            with pytest.raises(pickle.UnpicklingError, match=UNSAFE_ENV):
                checkpoint.CheckpointLoader.load_checkpoint(str(real_getattr))
            checkpoint.CheckpointLoader.load_checkpoint(str(good), map_location='cpu')
    assert not marker.exists()
    assert all(g in torch.serialization.get_safe_globals() for g in SAFE_CHECKPOINT_GLOBALS)
    # a plain torch.load after all that: the allow-list is there
    assert sorted(torch.load(good, map_location='cpu', weights_only=True)) == [
        'message_hub', 'meta', 'state_dict']


OPT_OUT = '''
import sys
import mmevt
from mmengine.runner.checkpoint import CheckpointLoader
CheckpointLoader.load_checkpoint(sys.argv[1], map_location='cpu')
print('LOADED')
'''


@pytest.mark.e2e
def test_unsafe_loading_only_by_explicit_opt_out_and_logged(tmp_path):
    from mmevt.patches.checkpoint_loading import UNSAFE_ENV
    marker = tmp_path / 'ran'
    bad = tmp_path / 'code.pth'
    torch.save({'state_dict': {}, 'meta': RunsCode(str(marker))}, bad)
    refused = run_tool('-c', OPT_OUT, str(bad), check=False)
    assert refused.returncode != 0 and f'set {UNSAFE_ENV}=1' in refused.stdout
    assert not marker.exists()
    out = run_tool('-c', OPT_OUT, str(bad), env={UNSAFE_ENV: '1'})
    assert 'LOADED' in out and f'{UNSAFE_ENV}=1: loading' in out and 'weights_only=False' in out
    assert marker.exists()  # the user asked for it: the pickled code ran


# ------------------------------------------------------------------------- pip and the wheel
@pytest.fixture(scope='module')
def wheel_dir(tmp_path_factory):
    """mmevt's wheel (built from a copy of the sources) beside an upstream mmengine wheel."""
    tmp = tmp_path_factory.mktemp('wheels')
    src, out = tmp / 'mmevt-src', tmp / 'links'
    shutil.copytree(REPO, src, ignore=COPY_SKIP)
    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps',
                    '--no-build-isolation', '-w', str(out), str(src)], check=True,
                   timeout=HANG_TIMEOUT)
    shutil.copy(bootstrap_wheel('mmengine-0.10.7-*.whl'), out)
    return out


@pytest.mark.e2e
def test_pip_install_of_the_wheel_leaves_the_stack_alone(wheel_dir, tmp_path):
    # the README's `pip install dist/mmevt-...whl`, and with the extra of this stack; the
    # upstream mmengine wheel beside it must never be picked (on the fork it would overwrite
    # onedl-mmengine's files)
    wheel = next(wheel_dir.glob('mmevt-*.whl'))
    for requirement in (str(wheel), f'{wheel}[{current_stack()}]'):
        report = tmp_path / 'report.json'
        proc = subprocess.run([sys.executable, '-m', 'pip', 'install', '--dry-run',
                               '--no-index', '--find-links', str(wheel_dir), '--report',
                               str(report), requirement], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=HANG_TIMEOUT)
        assert proc.returncode == 0, proc.stdout
        installs = [item['metadata']['name']
                    for item in json.loads(report.read_text())['install']]
        assert installs == ['mmevt'], (requirement, installs)
    meta = subprocess.run([sys.executable, '-c', (
        'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); '
        'print(z.read(next(n for n in z.namelist() if n.endswith("METADATA"))).decode())'),
        str(wheel)], stdout=subprocess.PIPE, text=True, check=True).stdout
    requires = [line.split(':', 1)[1].strip() for line in meta.splitlines()
                if line.startswith('Requires-Dist:')]
    core = sorted(re.match(r'[\w.-]+', r).group() for r in requires if 'extra ==' not in r)
    assert core == ['einops', 'numpy', 'torch'], requires
    assert any(r.startswith('mmengine') and 'extra == "upstream"' in r for r in requires)
    assert any(r.startswith('onedl-mmengine') and 'extra == "fork"' in r for r in requires)
    assert 'License-Expression: Apache-2.0' in meta


# ------------------------------------------------------- each patch switched off by name
SWITCH_PROBE = '''
import json
import mmevt
import torch
from mmengine.analysis import complexity_analysis
from mmengine.config import utils as config_utils
from mmengine.dist import utils as dist_utils
from mmengine.fileio.backends.local_backend import LocalBackend
from mmengine.hooks import checkpoint_hook
from mmengine.optim import DefaultOptimWrapperConstructor
from mmengine.runner import checkpoint
from mmengine.utils import package_utils
from mmevt import patches
from mmevt.patches.checkpoint_loading import SAFE_CHECKPOINT_GLOBALS
ours = lambda obj: getattr(obj, '__module__', '').startswith('mmevt')
print(json.dumps({
    'package-lookup': ours(package_utils.get_installed_path),
    'config-prefix': 'mmevt' in config_utils.MODULE2PACKAGE,
    'config-index-cache': ours(config_utils._get_cfg_metainfo),
    'checkpoint-allow-list': SAFE_CHECKPOINT_GLOBALS[-1] in torch.serialization.get_safe_globals(),
    'strict-checkpoint-loader': (ours(checkpoint.CheckpointLoader._schemes[''])
                                 and ours(checkpoint.load_url)),
    'atomic-local-writes': ours(LocalBackend.put) and ours(checkpoint_hook.open),
    'cpu-distributed': getattr(dist_utils._init_dist_pytorch, '_mmevt_cpu', False),
    'plain-param-groups': getattr(DefaultOptimWrapperConstructor.__call__,
                                  '_mmevt_plain_groups', False),
    'flop-handles': ('aten::scaled_dot_product_attention'
                     in complexity_analysis._DEFAULT_SUPPORTED_FLOP_OPS),
    'applied': patches.APPLIED}))
'''


def _switch_probe(value):
    import json
    env = {'MMEVT_PATCHES': value} if value is not None else {}
    return json.loads(run_tool('-c', SWITCH_PROBE, env=env).strip().splitlines()[-1])


@pytest.mark.e2e
def test_each_import_patch_can_be_switched_off_by_name():
    from mmevt.patches import IMPORT_PATCHES
    on = _switch_probe(None)
    assert all(on[name] is True for name in IMPORT_PATCHES), on
    assert set(on['applied'].values()) == {'applied'}
    value = ','.join(f'-{name}' for name in IMPORT_PATCHES)
    off = _switch_probe(value)
    assert not any(off[name] for name in IMPORT_PATCHES), off
    assert off['applied'] == {n: f'switched off (MMEVT_PATCHES={value})' for n in IMPORT_PATCHES}
    # one off, the rest on; '+' (or nothing) keeps a patch on
    some = _switch_probe('-flop-handles, +atomic-local-writes')
    assert [n for n in IMPORT_PATCHES if not some[n]] == ['flop-handles']
    out = run_tool('-m', 'mmevt.info', env={'MMEVT_PATCHES': '-atomic-local-writes'})
    assert ('atomic-local-writes [switched off (MMEVT_PATCHES=-atomic-local-writes)] '
            '(mmevt.patches.atomic_writes)') in out
    assert 'flop-handles [applied]' in out


@pytest.mark.parametrize('value, words', [
    ('-nope', "'-nope' cannot be switched (no patch has that name)"),
    ('-mmdeploy-exporter', 'it applies only inside mmevt-deploy, not at import'),
])
def test_a_switch_naming_no_import_patch_is_refused(value, words):
    from mmevt.patches import IMPORT_PATCHES, switched_off
    with pytest.raises(ValueError) as err:
        switched_off(value)
    assert words in str(err.value) and ', '.join(IMPORT_PATCHES) in str(err.value)
    assert switched_off('-flop-handles,+flop-handles') == ()
    assert switched_off(' -flop-handles ,, ') == ('flop-handles', )


def test_every_patch_says_what_changes_for_other_code():
    from mmevt.patches import IMPORT_PATCHES, PATCHES, SWITCHED_OFF
    page = open(osp.join(REPO, 'docs', 'patches.md')).read()
    assert sorted(SWITCHED_OFF) == sorted(IMPORT_PATCHES)
    for patch in PATCHES:
        assert patch.others, patch.name
        if patch.when == 'import':  # docs/patches.md's table says it in the same words
            row = f'| `{patch.name}` | {patch.others} | {SWITCHED_OFF[patch.name]} |'
            assert row in page, row


NEEDS_PACKAGE_LOOKUP = '''
import sys
from mmevt.toolkits import load_config
load_config(sys.argv[1])
'''


@pytest.mark.e2e
def test_mmevts_config_loading_names_a_switched_off_patch_it_needs():
    # upstream mmengine 0.10.7 then needs pkg_resources for mmseg:: bases, the fork's the
    # distribution 'mmsegmentation': either way the error says which patch would fix it
    proc = run_tool('-c', NEEDS_PACKAGE_LOOKUP, UPERNET, check=False,
                    env={'MMEVT_PATCHES': '-package-lookup'})
    assert proc.returncode != 0
    assert ("mmevt's patch 'package-lookup' is switched off (MMEVT_PATCHES="
            "'-package-lookup')") in proc.stdout, proc.stdout[-3000:]
    run_tool('-c', NEEDS_PACKAGE_LOOKUP, UPERNET)


# ------------------------------------------- plain-param-groups, on a model that is not EVT
def _paramwise_constructor():
    """mmengine's default constructor for AdamW with a ``paramwise_cfg`` (conv at half lr,
    norms without weight decay), given ConfigDicts as a runner gives it its config's."""
    from mmengine.config import ConfigDict
    from mmengine.optim import DefaultOptimWrapperConstructor
    return DefaultOptimWrapperConstructor(
        ConfigDict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-2,
                                                       weight_decay=0.05)),
        ConfigDict(norm_decay_mult=0.0, custom_keys={'0.': dict(lr_mult=0.5)}))


def _compiled_steps(constructor_call, model, steps: int = 2):
    """``steps`` AdamW updates of ``model`` through an optimizer built by
    ``constructor_call``, as mmengine's ``compile`` switch runs them (the step inside the
    compiled function; Dynamo's aot_eager backend)."""
    torch._dynamo.reset()
    optim_wrapper = constructor_call(_paramwise_constructor(), model)

    def train_step(x):
        loss = model(x).square().mean()
        optim_wrapper.update_params(loss)
        return loss

    step = torch.compile(train_step, backend='aot_eager')
    for i in range(steps):
        step(_batch(i))
    return optim_wrapper.optimizer


def _batch(i: int) -> torch.Tensor:
    # random, not constant: a constant image makes BN's input constant and the conv's
    # gradient rounding noise, which Adam's normalised step turns into lr-sized moves
    return torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(i))


def test_plain_param_groups_let_dynamo_trace_a_paramwise_optimizer_step():
    import copy

    from mmengine.optim import DefaultOptimWrapperConstructor

    import mmevt  # noqa: F401  (applies the patch)
    call = DefaultOptimWrapperConstructor.__call__
    assert call._mmevt_plain_groups
    torch.manual_seed(0)
    # no conv bias: BN removes it, so its gradient is rounding noise (see _batch)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.BatchNorm2d(4),
                                torch.nn.Flatten(), torch.nn.Linear(144, 2))
    eager, compiled = copy.deepcopy(model), copy.deepcopy(model)
    # mmengine's own __call__: ConfigDict groups, on which torch's Dynamo fails in the step
    with pytest.raises(Exception, match="'UserDefinedDictVariable' object has no attribute"):
        _compiled_steps(call._mmevt_original, copy.deepcopy(model))
    optimizer = _compiled_steps(call, compiled)
    assert {type(g) for g in optimizer.param_groups} == {dict}
    # the groups paramwise_cfg made are kept: conv at half lr, BN without weight decay
    by_param = {id(p): g for g in optimizer.param_groups for p in g['params']}
    assert by_param[id(compiled[0].weight)]['lr'] == 0.5e-2
    assert by_param[id(compiled[1].weight)]['weight_decay'] == 0.0
    # and the compiled steps update the weights as eager steps do
    optim_wrapper = call(_paramwise_constructor(), eager)
    for i in range(2):
        optim_wrapper.update_params(eager(_batch(i)).square().mean())
    for (name, want), got in zip(eager.state_dict().items(), compiled.state_dict().values()):
        assert torch.allclose(got.float(), want.float(), rtol=1e-5, atol=1e-6), name
