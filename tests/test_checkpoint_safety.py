"""Checkpoints after ``import mmevt``, seen from code that is not EVT's: every checkpoint
mmengine writes loads under ``weights_only=True`` (numpy 1 era included), every
``CheckpointLoader`` scheme refuses a hostile pickle, and refusals say what to do."""
import copy
import io
import logging
import os
import os.path as osp
import pickle
import shutil
import ssl
import subprocess
import sys
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch

from helpers import RunsCode, plain_mmengine_runner

pytestmark = pytest.mark.usefixtures('safe_globals_restored')


class PluginRecord:
    """Another plugin's object that its hook keeps in a runner checkpoint."""

    def __init__(self, value):
        self.value = value


def _strict_load(path):
    import mmevt  # noqa: F401
    from mmengine.runner.checkpoint import CheckpointLoader
    return CheckpointLoader.load_checkpoint(str(path), map_location='cpu')


# -------------------------------------------------------------------- numpy 1 and numpy 2
def _as_numpy_1(src, dst):
    """``src`` with its pickle naming numpy's modules as numpy 1.x writes them.

    numpy 2 pickles ``numpy._core.multiarray._reconstruct`` / ``.scalar``; numpy 1.x wrote
    ``numpy.core.multiarray...`` for the same objects (no numpy 1 in this venv: the module
    names in the pickle are rewritten, nothing else). Zip files: ``data.pkl`` only; legacy
    files: the pickle stream, which comes before the raw tensor bytes.
    """
    raw = open(src, 'rb').read()
    if zipfile.is_zipfile(src):
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, 'w') as zout:
            for item in zin.infolist():
                data = zin.read(item)
                if item.filename.endswith('/data.pkl'):
                    data = data.replace(b'numpy._core.', b'numpy.core.')
                zout.writestr(item, data)
    else:
        open(dst, 'wb').write(raw.replace(b'numpy._core.', b'numpy.core.'))
    assert b'numpy._core.' not in _pickle_bytes(dst) and b'numpy.core.' in _pickle_bytes(dst)


def _pickle_bytes(path):
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return b''.join(z.read(n) for n in z.namelist() if n.endswith('data.pkl'))
    return open(path, 'rb').read()


def _numpy_meta():
    return {'seed': np.int64(3), 'best': np.float64(0.25), 'hist': np.arange(3.),
            'ints': np.array([[1, 2]], dtype=np.int32), 'flag': np.bool_(True)}


@pytest.mark.parametrize('zip_format', [True, False], ids=['zip', 'legacy'])
def test_numpy_1_and_numpy_2_spellings_load(tmp_path, zip_format):
    import mmevt  # noqa: F401
    from mmevt.patches.checkpoint_loading import SAFE_CHECKPOINT_GLOBALS
    numpy2, numpy1 = tmp_path / 'numpy2.pth', tmp_path / 'numpy1.pth'
    torch.save({'state_dict': {'w': torch.arange(4.)}, 'meta': _numpy_meta()}, numpy2,
               _use_new_zipfile_serialization=zip_format)
    _as_numpy_1(numpy2, numpy1)
    for path in (numpy2, numpy1):
        for loaded in (_strict_load(path), torch.load(path, weights_only=True)):
            meta = loaded['meta']
            assert meta['best'] == 0.25 and meta['seed'] == 3 and meta['flag']
            assert meta['hist'].tolist() == [0., 1., 2.] and meta['ints'].dtype == np.int32
            assert torch.equal(loaded['state_dict']['w'], torch.arange(4.))
    # the pair entries are what load numpy 1's names: without them the file is refused
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals([g for g in SAFE_CHECKPOINT_GLOBALS
                                          if not isinstance(g, tuple)])
    torch.load(numpy2, weights_only=True)
    with pytest.raises(pickle.UnpicklingError, match='numpy.core.multiarray'):
        torch.load(numpy1, weights_only=True)


def test_a_runner_checkpoint_written_under_numpy_1_resumes(tmp_path):
    # the runner's own file (its message hub's HistoryBuffers hold ndarrays), with numpy's
    # module names as numpy 1.x pickled them
    import mmevt  # noqa: F401
    plain_mmengine_runner(tmp_path / 'run').train()
    old = tmp_path / 'numpy1' / 'iter_2.pth'
    old.parent.mkdir()
    _as_numpy_1(tmp_path / 'run' / 'iter_2.pth', old)
    resumed = plain_mmengine_runner(tmp_path / 'resumed', load_from=str(old), resume=True)
    resumed.train()
    assert resumed.iter == 4


# --------------------------------------------------------- what the runner itself writes
# every parameter scheduler of mmengine and the toolkits, by kind; the LR / Momentum /
# ParamScheduler classes of a kind take the same arguments (iterations 0-4 of 4)
SCHEDULER_ARGS = {
    'Constant': dict(factor=0.5, end=2),
    'CosineAnnealing': dict(T_max=4),
    'CosineRestart': dict(periods=[2, 2], restart_weights=[1, 0.5], eta_min=0.),
    'Exponential': dict(gamma=0.9),
    'Linear': dict(start_factor=0.5, end=2),
    'MultiStep': dict(milestones=[1, 3]),
    'Step': dict(step_size=2),
    'Poly': dict(power=1., end=4),
    'OneCycle': dict(eta_max=0.2, total_steps=4),
    'ReduceOnPlateau': dict(monitor='error', patience=0),  # by epoch only
    'QuadraticWarmup': dict(end=2),  # mmdet
    'PolyLRRatio': dict(power=1., end=4, eta_min_ratio=0.1),  # mmseg
}
SUFFIXES = ('ParamScheduler', 'Momentum', 'LR', 'WeightDecay')  # WeightDecay: mmpretrain


def _kind(name):
    if name in SCHEDULER_ARGS:
        return name
    return next((name[:-len(s)] for s in SUFFIXES if name.endswith(s)), name)


def registered_schedulers():
    """Every parameter scheduler registered by mmengine and the installed toolkits: name ->
    the scope to build it in."""
    import importlib

    from mmengine.registry import PARAM_SCHEDULERS
    found = dict.fromkeys(PARAM_SCHEDULERS.module_dict, 'mmengine')
    for toolkit in ('mmdet', 'mmseg', 'mmpretrain', 'mmpose'):
        try:
            registry = importlib.import_module(f'{toolkit}.registry').PARAM_SCHEDULERS
            importlib.import_module(f'{toolkit}.engine')  # registers its schedulers
        except ImportError:
            continue
        found.update(dict.fromkeys(set(registry.module_dict) - set(found), toolkit))
    return found


def _by_epoch(name):
    return _kind(name) == 'ReduceOnPlateau'


def _scheduler_cfg(name, scope):
    cfg = dict(type=name, _scope_=scope, by_epoch=_by_epoch(name),
               **SCHEDULER_ARGS[_kind(name)])
    if name.endswith('ParamScheduler'):
        cfg['param_name'] = 'lr'
    return cfg


def _state_at_start():
    """A hook recording, when training starts (after a resume), what a resume restores."""
    from mmengine.hooks import Hook

    class StateAtStart(Hook):
        seen = None

        def before_train(self, runner):  # a copy: state dicts hold the live tensors
            self.seen = copy.deepcopy(dict(
                iter=runner.iter, epoch=runner.epoch,
                schedulers=[s.state_dict() for s in runner.param_schedulers],
                optimizer=runner.optim_wrapper.state_dict(),
                hub=runner.message_hub.state_dict()))

    return StateAtStart()


def _equal(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if callable(a):
        return a is b or (getattr(a, '__qualname__', None) == getattr(b, '__qualname__', 1))
    if hasattr(a, 'state_dict') and hasattr(b, 'state_dict'):
        return _equal(a.state_dict(), b.state_dict())
    if hasattr(a, '__dict__') and type(a) is type(b):
        return _equal(vars(a), vars(b))
    return a == b


NEW_RUN_INFO = ('iter', 'epoch', 'experiment_name', 'loop_stage')


def test_table_covers_every_registered_scheduler():
    missing = sorted(n for n in registered_schedulers() if _kind(n) not in SCHEDULER_ARGS)
    assert not missing, f'add their arguments to SCHEDULER_ARGS: {missing}'


def test_every_scheduler_checkpoint_loads_and_resumes_with_its_state(tmp_path):
    import mmevt  # noqa: F401
    from mmengine.runner.checkpoint import CheckpointLoader
    failures = {}
    for name, scope in sorted(registered_schedulers().items()):
        work = tmp_path / name
        try:
            # iterations 0-4, a checkpoint after 2; by epoch: 2 epochs, one after epoch 1
            by_epoch = _by_epoch(name)
            run = partial(plain_mmengine_runner,
                          param_scheduler=[_scheduler_cfg(name, scope)], by_epoch=by_epoch,
                          max_iters=2 if by_epoch else 4, interval=1 if by_epoch else 2)
            run(work).train()
            ckpt = work / ('epoch_1.pth' if by_epoch else 'iter_2.pth')
            saved = CheckpointLoader.load_checkpoint(str(ckpt), map_location='cpu')
            probe = _state_at_start()
            resumed = run(work / 'resumed', load_from=str(ckpt), resume=True)
            resumed.register_hook(probe, 'LOWEST')
            resumed.train()
            assert probe.seen['iter'] == saved['meta']['iter'] == (4 if by_epoch else 2)
            assert probe.seen['epoch'] == saved['meta']['epoch']
            assert _equal(probe.seen['schedulers'], saved['param_schedulers'])
            assert _equal(probe.seen['optimizer'], saved['optimizer'])
            # the message hub as saved, but for what RuntimeInfoHook sets for the new run
            # (its name and stage; the saved 'iter' is the last trained one's index)
            hub, seen_hub = saved['message_hub'], probe.seen['hub']
            assert _equal(seen_hub['log_scalars'], hub['log_scalars'])
            assert _equal({k: v for k, v in seen_hub['runtime_info'].items()
                           if k not in NEW_RUN_INFO},
                          {k: v for k, v in hub['runtime_info'].items()
                           if k not in NEW_RUN_INFO})
            assert resumed.iter == (8 if by_epoch else 4)
        except Exception as err:  # noqa: BLE001  (one report of every failing scheduler)
            failures[name] = f'{type(err).__name__}: {str(err)[:300]}'
    assert not failures, failures


def _plain_runner_hook_checkpoint(tmp_path):
    """A plain run with the hooks and optimizer state a runner checkpoint commonly holds."""
    from mmengine.hooks import Hook

    class PluginHook(Hook):  # another plugin's hook keeping its own object in the hub
        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            runner.message_hub.update_info('plugin_record', PluginRecord(runner.iter))

    runner = plain_mmengine_runner(
        tmp_path, optimizer=dict(type='AdamW', lr=1e-3),
        custom_hooks=[dict(type='EMAHook'), PluginHook()])
    runner.train()
    return tmp_path / 'iter_4.pth'


def test_another_plugins_object_is_refused_until_the_user_allows_it(tmp_path):
    import mmevt  # noqa: F401
    ckpt = _plain_runner_hook_checkpoint(tmp_path)
    with pytest.raises(pickle.UnpicklingError) as refused:
        _strict_load(ckpt)
    message = str(refused.value)
    name = f'{__name__}.PluginRecord'
    assert message.startswith(f'mmevt refused to load checkpoint {str(ckpt)!r}')
    assert f'the global {name}.' in message and '\x1b[' not in message
    assert 'MMEVT_ALLOW_UNSAFE_CHECKPOINTS=1' in message
    # the fix it spells works as written
    fix = next(line for line in message.splitlines() if 'add_safe_globals' in line)
    code = fix.split('allow it before loading: ', 1)[1]
    assert f"({name}, '{name}')" in code
    exec(code, {})  # noqa: S102  (the user's own allow-list call)
    loaded = _strict_load(ckpt)
    assert loaded['message_hub']['runtime_info']['plugin_record'].value == 3  # last iter
    assert 'ema_state_dict' in loaded and loaded['optimizer']['state']
    assert loaded['meta']['dataset_meta'] == {'classes': ('a', 'b'), 'palette': [(1, 2, 3)]}


def test_mmcv_1_era_checkpoint_loads(tmp_path):
    # what an mmdet 2.x / mmseg 0.x zoo file holds, restated from mmcv 1.x's runner
    # (mmcv/runner/checkpoint.py save_checkpoint: meta + mmcv_version + time, state_dict,
    # optimizer; EpochBasedRunner.save_checkpoint: epoch, iter; mmdet 2.x train_detector:
    # CLASSES, config; mmseg 0.x: PALETTE), written by numpy 1 in torch's legacy format
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    meta = dict(mmdet_version='2.28.2', CLASSES=('person', 'car'), PALETTE=[[220, 20, 60]],
                config='model = dict(type="MaskRCNN")', env_info='sys.platform: linux',
                seed=np.int64(0), exp_name='mask_rcnn_r50_fpn_1x_coco.py', epoch=12,
                iter=87960, mmcv_version='1.7.1', time='Tue Mar  7 10:00:00 2023',
                hook_msgs=dict(last_ckpt='work_dirs/epoch_12.pth'))
    numpy2 = tmp_path / 'numpy2.pth'
    torch.save(dict(meta=meta, state_dict=model.state_dict(), optimizer=optimizer.state_dict()),
               numpy2, _use_new_zipfile_serialization=False)
    old = tmp_path / 'mask_rcnn_r50_fpn_1x_coco_20200205-d4b0c5d6.pth'
    _as_numpy_1(numpy2, old)
    loaded = _strict_load(old)
    assert loaded['meta']['CLASSES'] == ('person', 'car') and loaded['meta']['seed'] == 0
    assert loaded['optimizer']['state'][0]['momentum_buffer'].shape == (2, 2)


# ----------------------------------------------------------------- every scheme is strict
SCHEMES = ['', 'http://', 'https://', 'pavi://', r'(\S+\:)?s3://', r'(\S+\:)?petrel://',
           'modelzoo://', 'torchvision://', 'open-mmlab://', 'openmmlab://', 'mmcls://']


def _self_signed_certificate(directory):
    cert, key = osp.join(directory, 'cert.pem'), osp.join(directory, 'key.pem')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1',
                    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
                    '-keyout', key, '-out', cert], check=True, capture_output=True)
    return cert, key


@pytest.fixture
def file_servers(tmp_path):
    """An http and an https server on 127.0.0.1 serving ``served/`` (stopped afterwards)."""
    served = tmp_path / 'served'
    served.mkdir()
    handler = partial(SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    http = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    https = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    cert, key = _self_signed_certificate(str(tmp_path))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    https.socket = context.wrap_socket(https.socket, server_side=True)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (http, https)]
    for thread in threads:
        thread.start()
    yield dict(dir=served, http=f'http://127.0.0.1:{http.server_port}',
               https=f'https://127.0.0.1:{https.server_port}', cert=cert)
    for server in (http, https):
        server.shutdown()
        server.server_close()


def _storage_services(root):
    """Importable ``pavi`` and ``petrel_client`` packages serving files from ``root``.

    Both are closed services' clients (SenseTime's) that mmengine's pavi and ceph loaders
    import; these answer their two calls from a local directory, so the test reaches
    mmengine's own loader code after the download.
    """
    pkgs = root / 'clients'
    (pkgs / 'pavi').mkdir(parents=True)
    (pkgs / 'petrel_client').mkdir()
    (pkgs / 'pavi' / '__init__.py').write_text('')
    (pkgs / 'pavi' / 'modelcloud.py').write_text(f'''
import os, shutil
class _Model:
    def __init__(self, path):
        self.name = os.path.basename(path)
        self._src = os.path.join({str(root)!r}, self.name)
    def download(self, dst):
        shutil.copy(self._src, dst)
def get(path):
    return _Model(path)
''')
    (pkgs / 'petrel_client' / '__init__.py').write_text('')
    (pkgs / 'petrel_client' / 'client.py').write_text(f'''
import os
class Client:
    def __init__(self, *args, **kwargs):
        pass
    def Get(self, path):
        return open(os.path.join({str(root)!r}, os.path.basename(str(path))), 'rb').read()
''')
    return pkgs


def _paths_through_every_scheme(name, servers, tmp_path):
    """scheme -> a path that reaches it and loads the file ``name`` (put where that scheme
    finds it: served, in torch.hub's cache, in mmengine's home, or behind a storage client).
    """
    from mmengine.runner.checkpoint import (get_external_models, get_mmcls_models,
                                            get_torchvision_models)
    cache = osp.join(torch.hub.get_dir(), 'checkpoints')
    home = os.environ['MMENGINE_HOME']
    os.makedirs(cache, exist_ok=True)
    src = servers['dir'] / name

    def cached(url, tag):  # a file already in torch.hub's cache under the URL's name
        base = osp.basename(url)
        shutil.copy(src, osp.join(cache, base))
        return tag

    tv = next(iter(get_torchvision_models().items()))
    mmcls = next(iter(get_mmcls_models().items()))
    url_backed = next(k for k, v in get_external_models().items() if v.startswith('http'))
    local_name = f'local_{name}'
    with open(osp.join(home, 'open_mmlab.json'), 'w') as f:
        f.write(f'{{"{local_name}": "{name}"}}')
    shutil.copy(src, osp.join(home, name))
    return {
        '': [str(src)],
        'http://': [f'{servers["http"]}/{name}'],
        'https://': [f'{servers["https"]}/{name}'],
        'pavi://': [f'pavi://models/{name}'],
        r'(\S+\:)?s3://': [f's3://bucket/{name}', f'open-mmlab:s3://bucket/{name}'],
        r'(\S+\:)?petrel://': [f'petrel://bucket/{name}'],
        'modelzoo://': [cached(tv[1], f'modelzoo://{tv[0]}')],
        'torchvision://': [cached(tv[1], f'torchvision://{tv[0]}')],
        'open-mmlab://': [cached(get_external_models()[url_backed],
                                 f'open-mmlab://{url_backed}'), f'open-mmlab://{local_name}'],
        'openmmlab://': [f'openmmlab://{local_name}'],
        'mmcls://': [cached(mmcls[1], f'mmcls://{mmcls[0]}')],
    }


def test_every_scheme_loads_strictly(tmp_path, file_servers, monkeypatch):
    import mmevt  # noqa: F401
    from mmengine.runner.checkpoint import CheckpointLoader
    assert sorted(CheckpointLoader._schemes) == sorted(SCHEMES)
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    monkeypatch.setenv('MMENGINE_HOME', str(tmp_path / 'mmengine_home'))
    monkeypatch.setenv('SSL_CERT_FILE', file_servers['cert'])
    os.makedirs(os.environ['MMENGINE_HOME'])
    monkeypatch.syspath_prepend(str(_storage_services(file_servers['dir'])))
    marker = tmp_path / 'hostile-code-ran'
    torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': RunsCode(marker)},
               file_servers['dir'] / 'hostile.pth')
    # mmcls:// keeps the backbone's weights, without their prefix
    torch.save({'state_dict': {'w': torch.ones(2), 'backbone.w': torch.ones(2)},
                'meta': _numpy_meta()}, file_servers['dir'] / 'good.pth')
    for name, expect_refusal in (('good.pth', False), ('hostile.pth', True)):
        paths = _paths_through_every_scheme(name, file_servers, tmp_path)
        assert sorted(paths) == sorted(CheckpointLoader._schemes)  # none missed
        for scheme, scheme_paths in paths.items():
            for path in scheme_paths:
                loader = CheckpointLoader._get_checkpoint_loader(path)
                assert loader is CheckpointLoader._schemes[scheme], (path, scheme)
                if expect_refusal:
                    with pytest.raises(pickle.UnpicklingError, match='mmevt refused'):
                        CheckpointLoader.load_checkpoint(path, map_location='cpu')
                else:
                    loaded = CheckpointLoader.load_checkpoint(path, map_location='cpu')
                    assert torch.equal(loaded['state_dict']['w'], torch.ones(2)), path
        assert not marker.exists()


# ------------------------------------------------------------ switches and their words
@pytest.fixture
def hostile(tmp_path):
    marker = tmp_path / 'ran'
    path = tmp_path / 'hostile.pth'
    torch.save({'state_dict': {}, 'meta': RunsCode(marker)}, path)
    return path, marker


@pytest.fixture
def mmengine_log():
    from mmengine.logging import MMLogger
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    yield stream
    logger.removeHandler(handler)


@pytest.mark.parametrize('env', [
    {'MMEVT_ALLOW_UNSAFE_CHECKPOINTS': 'yes'}, {'MMEVT_ALLOW_UNSAFE_CHECKPOINTS': 'True'},
    {'MMEVT_ALLOW_UNSAFE_CHECKPOINTS': 'y'}, {'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD': '1'}])
def test_explicit_opt_outs_with_torchs_truth_values_are_logged(hostile, env, monkeypatch,
                                                                mmengine_log):
    path, marker = hostile
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _strict_load(path)
    assert marker.exists()  # the user asked for it: the pickled code ran
    name, value = next(iter(env.items()))
    assert f'{name}={value}: loading {str(path)!r} with weights_only=False' in (
        mmengine_log.getvalue())


@pytest.mark.parametrize('value', ['0', 'no', 'false', ''])
def test_anything_else_is_no_opt_out(hostile, value, monkeypatch):
    path, marker = hostile
    monkeypatch.setenv('MMEVT_ALLOW_UNSAFE_CHECKPOINTS', value)
    with pytest.raises(pickle.UnpicklingError, match='set MMEVT_ALLOW_UNSAFE_CHECKPOINTS=1'):
        _strict_load(path)
    assert not marker.exists()


def test_torchs_force_weights_only_wins_and_the_error_says_so(hostile, monkeypatch):
    path, marker = hostile
    monkeypatch.setenv('MMEVT_ALLOW_UNSAFE_CHECKPOINTS', '1')
    monkeypatch.setenv('TORCH_FORCE_WEIGHTS_ONLY_LOAD', 'true')
    with pytest.raises(pickle.UnpicklingError) as refused:
        _strict_load(path)
    assert 'TORCH_FORCE_WEIGHTS_ONLY_LOAD=true is set' in str(refused.value)
    assert "wins over mmevt's opt-out (MMEVT_ALLOW_UNSAFE_CHECKPOINTS)" in str(refused.value)
    assert not marker.exists()


def test_direct_torch_calls_of_other_code_stay_as_torch_makes_them(hostile, monkeypatch):
    import mmevt  # noqa: F401
    path, marker = hostile
    with pytest.raises(pickle.UnpicklingError, match='Weights only load failed'):
        torch.load(path)  # torch's own words, not mmevt's
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    torch.load(path)  # torch's switch, as torch applies it
    assert marker.exists()


SWITCHED_OFF = '''
import sys
import mmevt
from mmengine.runner.checkpoint import CheckpointLoader
CheckpointLoader.load_checkpoint(sys.argv[1], map_location='cpu')
'''


@pytest.mark.e2e
def test_a_refusal_names_the_switched_off_allow_list(tmp_path):
    from helpers import run_tool
    path = tmp_path / 'numpy.pth'
    torch.save({'meta': _numpy_meta()}, path)
    proc = run_tool('-c', SWITCHED_OFF, str(path), check=False,
                    env={'MMEVT_PATCHES': '-checkpoint-allow-list'})
    assert proc.returncode != 0
    assert ("mmevt's patch 'checkpoint-allow-list' is switched off (MMEVT_PATCHES="
            "'-checkpoint-allow-list')") in proc.stdout, proc.stdout[-3000:]
    run_tool('-c', SWITCHED_OFF, str(path))  # on by default


FROM_A_URL = '''
import sys
import mmevt
from mmengine.runner.checkpoint import CheckpointLoader
try:
    CheckpointLoader.load_checkpoint(sys.argv[1], map_location='cpu')
except Exception as err:
    print('REFUSED', type(err).__name__)
'''


@pytest.mark.e2e
def test_without_the_strict_loader_a_pickle_from_a_url_runs(tmp_path, file_servers):
    # the negative control of test_every_scheme_loads_strictly: mmengine's own http scheme
    # unpickles with weights_only=False
    from helpers import run_tool
    marker = tmp_path / 'ran-from-url'
    torch.save({'meta': RunsCode(marker)}, file_servers['dir'] / 'hostile.pth')
    url = f'{file_servers["http"]}/hostile.pth'
    env = {'TORCH_HOME': str(tmp_path / 'torch_home')}
    assert 'REFUSED UnpicklingError' in run_tool('-c', FROM_A_URL, url, env=env)
    assert not marker.exists()
    run_tool('-c', FROM_A_URL, url, env=dict(env, MMEVT_PATCHES='-strict-checkpoint-loader'))
    assert marker.exists()


def test_mmevts_loads_leave_the_users_own_allow_list_as_it_was(tmp_path):
    import argparse

    from mmevt.converters.rmt import load_authors_checkpoint
    torch.serialization.add_safe_globals([PluginRecord])  # the user's own entry
    before = sorted(map(str, torch.serialization.get_safe_globals()))
    path = tmp_path / 'authors.pth'
    torch.save({'model': {'w': torch.ones(1)}, 'args': argparse.Namespace(lr=1e-3),
                'meta': _numpy_meta()}, path)
    assert load_authors_checkpoint(str(path))['args'].lr == 1e-3
    good = tmp_path / 'good.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'record': PluginRecord(1)}, good)
    assert _strict_load(good)['record'].value == 1  # the user's entry counts in mmevt's loads
    assert sorted(map(str, torch.serialization.get_safe_globals())) == before


def test_a_user_who_allows_the_real_getattr_gets_it_in_their_own_loads(tmp_path):
    from mmengine.logging import HistoryBuffer

    class RealGetattr:
        def __reduce__(self):
            return (getattr, (HistoryBuffer, '__init__'))

    path = tmp_path / 'getattr.pth'
    torch.save({'x': RealGetattr()}, path)
    import mmevt  # noqa: F401
    with pytest.raises(pickle.UnpicklingError, match='only allows'):
        torch.load(path, weights_only=True)
    torch.serialization.add_safe_globals([getattr])  # the user's choice, for their loads
    assert torch.load(path, weights_only=True)['x'] is HistoryBuffer.__init__
    with pytest.raises(pickle.UnpicklingError, match='only allows'):
        _strict_load(path)  # mmengine's loads keep the restricted one


def test_both_torch_switches_at_once_are_refused_naming_them(hostile, monkeypatch):
    path, marker = hostile
    monkeypatch.setenv('TORCH_FORCE_WEIGHTS_ONLY_LOAD', '1')
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', 'yes')
    with pytest.raises(ValueError, match=r'both TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 and '
                                         r'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=yes are set'):
        _strict_load(path)
    assert not marker.exists()
