"""Shared test helpers: repo paths, the tool runner, a gradient probe, config writing.

Imported by test modules as ``from helpers import ...`` (pytest puts ``tests/`` on
``sys.path``); ``conftest.py`` keeps the fixtures only.
"""
import atexit
import copy
import functools
import importlib.util
import os
import os.path as osp
import re
import shutil
import subprocess
import sys
import tempfile
from types import ModuleType

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIGS = osp.join(REPO, 'configs')
# Every alternative token mixer once, for the tiny arch inside each task's end-to-end test.
# what a copy of the checkout for a build or a scratch clone leaves out
COPY_SKIP = shutil.ignore_patterns('.git', '.venv', '.venv-fork', '.venv-gpu', 'work_dirs', 'data',
                                   'build', 'dist', '*.egg-info', '__pycache__', '.pytest_cache',
                                   '.gpu_deps', 'gpu_results', '.mim')
MIXED_MIXERS = ("[dict(type='routing', n_win=4, topk=2), dict(type='external', memory_size=16), "
                "'window_grid', 'full']")


def probe_loss(outs):
    """A loss whose gradients are not ~0: fixed random projections of the outputs.

    ``o.mean()`` or ``o.square().mean()`` of LayerNorm-ed outputs is (nearly) constant, so
    gradients compared with such a loss would be numerical noise.
    """
    import torch
    gen = torch.Generator().manual_seed(0)
    return sum((o * torch.randn(o.shape, generator=gen).to(o)).sum() for o in outs)


# Subprocess timeouts only catch hangs: the slowest tool run of the suite takes ~3 minutes on
# an idle 2-core machine, so a run still going after an hour is stuck, not slow.
HANG_TIMEOUT = 3600


def free_threads() -> int:
    """Threads a subprocess may use without oversubscribing the machine: its cores minus the
    load that is not this test process's own (the 1-minute load average includes the test
    process itself, about 1 while it runs in-process work), at least 1."""
    cores = os.cpu_count() or 1
    try:
        others = max(0., os.getloadavg()[0] - 1)
    except OSError:  # no load average on this platform
        others = 0.
    return max(1, min(cores, int(cores - others + 0.5)))


def tool_env(**extra) -> dict:
    """``os.environ`` for a tool subprocess: threads from :func:`free_threads`, fixed hash
    seed, plus ``extra``."""
    threads = str(free_threads())
    return dict(os.environ, PYTHONHASHSEED='0', OMP_NUM_THREADS=threads,
                MKL_NUM_THREADS=threads, **extra)


def run_tool(*args, timeout=HANG_TIMEOUT, env=None, check=True):
    """Run ``python <args>`` from the repo root; return combined stdout+stderr."""
    full_env = tool_env(**(env or {}))
    proc = subprocess.run([sys.executable, *args], cwd=REPO, env=full_env, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f'{args} exited {proc.returncode}:\n{proc.stdout[-6000:]}')
    return proc.stdout if check else proc


def load_weights(ckpt) -> dict:
    """The weights of a checkpoint file (runner, authors' or bare layout), on the CPU."""
    import torch

    from mmevt.utils.checkpoint import unwrap_state_dict
    return unwrap_state_dict(torch.load(ckpt, map_location='cpu'))


def load_tool(rel_path: str) -> ModuleType:
    """Import a script of the repository (a tool under ``tools/``, ``docs/conf.py``) as a
    module from its path (no ``sys.path`` edits)."""
    path = osp.join(REPO, rel_path)
    name = 'tool_' + osp.splitext(osp.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_config(path, text):
    with open(path, 'w') as f:
        f.write(text)
    return str(path)


def demo_config_on(path, demo: str, root: str) -> str:
    """Write to ``path`` a config inheriting the demo config ``demo`` with its data at
    ``root`` (the train / val / test loaders' ``data_root``); return the path."""
    return write_config(path, f'''_base_ = {demo!r}
data_root = {root + '/'!r}
train_dataloader = dict(dataset=dict(data_root=data_root))
val_dataloader = dict(dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
''')


def last_metric(log: str, key: str) -> float:
    """The last value a tool's log prints for the metric ``key`` (``'coco/AP'``, ...)."""
    found = re.findall(rf'{re.escape(key)}: ([\d.]+)', log)
    assert found, log[-3000:]
    return float(found[-1])


def save_untrained(cfg_path: str, path) -> str:
    """Save the model of the config at ``cfg_path``, untrained and initialised as the runner
    does (seed 0), as a checkpoint the toolkits' test tools load; return its path."""
    import torch

    from mmevt.toolkits import build_model
    model = build_model(load_config(cfg_path), seed=0)
    model.init_weights()
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, str(path))
    return str(path)


@functools.lru_cache(maxsize=None)
def _parsed_config(path: str):
    import mmevt  # noqa: F401  (custom_imports of our configs)
    from mmengine.config import Config
    return Config.fromfile(path)


def load_config(path: str):
    """``Config.fromfile(path)``, parsed once per session (several test modules read every
    config); each call returns a copy the caller may change."""
    return copy.deepcopy(_parsed_config(osp.abspath(path)))


# ---------------------------------------------------------------- the stack under test
def current_stack() -> str:
    """``'upstream'`` or ``'fork'``: the stack of this venv (``mmevt.stack.detect_stack``)."""
    from mmevt.stack import detect_stack
    stack = detect_stack()
    assert stack is not None, 'the test venv must have exactly one mmengine distribution'
    return stack


# The toolkits on the upstream stack only (no fork of either: docs/pose.md, docs/action.md):
# module -> the distribution its "is not installed" errors name
UPSTREAM_ONLY_TOOLKITS = {'mmpose': 'mmpose', 'mmaction': 'mmaction2'}
# our configs that need one of them, by path prefix (their folders and the demos inheriting)
UPSTREAM_ONLY_CONFIGS = {
    (osp.join(CONFIGS, 'pose') + osp.sep, osp.join(CONFIGS, 'demo', 'td-')): 'mmpose',
    (osp.join(CONFIGS, 'action') + osp.sep, osp.join(CONFIGS, 'demo', 'tsn_')): 'mmaction',
}


def upstream_only_toolkit(path: str):
    """The upstream-only toolkit the config ``path`` of ours needs, or None."""
    path = osp.abspath(path)
    return next((t for prefixes, t in UPSTREAM_ONLY_CONFIGS.items()
                 if path.startswith(prefixes)), None)


def refused_where_missing(toolkit: str, config: str) -> bool:
    """Whether the upstream-only ``toolkit`` is missing; then this must be the fork stack, and
    loading ``config`` (a config needing it) is checked to be refused naming it."""
    if importlib.util.find_spec(toolkit) is not None:
        return False
    import pytest
    assert current_stack() == 'fork', f'{toolkit} is missing from the upstream stack'
    with pytest.raises(ModuleNotFoundError,
                       match=f'{UPSTREAM_ONLY_TOOLKITS[toolkit]} is not installed'):
        load_config(config)
    return True


def unscoped(value):
    """``value`` without the ``_scope_`` keys mmengine adds to a ``pkg::`` base's dicts."""
    if isinstance(value, dict):
        return {k: unscoped(v) for k, v in value.items() if k != '_scope_'}
    if isinstance(value, (list, tuple)):
        return type(value)(unscoped(v) for v in value)
    return value


# Prepended to a subprocess script: `import pkg_resources` fails as on setuptools >= 82,
# whatever this venv's setuptools is.
BLOCK_PKG_RESOURCES = '''
import importlib.abc, sys
class _NoPkgResources(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] == 'pkg_resources':
            raise ModuleNotFoundError("No module named 'pkg_resources'", name=name)
sys.meta_path.insert(0, _NoPkgResources())
'''


# a user config of two training iterations on the generated shapes (format with root=)
SEG_USER_CONFIG = '''_base_ = 'mmevt::demo/fpn_evt-demo_shapes.py'
data_root = {root!r}
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root))
val_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=2, val_interval=2)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))
'''


def bootstrap_wheel(pattern: str) -> str:
    """A wheel ``tools/bootstrap.sh`` downloaded for the tests (``<venv>/.mmevt-test-wheels``:
    upstream mmengine, a setuptools with ``pkg_resources``), found by glob ``pattern``."""
    import glob
    venv = osp.dirname(osp.dirname(sys.executable))
    found = sorted(glob.glob(osp.join(venv, '.mmevt-test-wheels', pattern)))
    assert found, f'no {pattern} in {venv}/.mmevt-test-wheels: run tools/bootstrap.sh'
    return found[-1]


@functools.lru_cache(maxsize=None)
def _setuptools_with_pkg_resources() -> str:
    """A directory holding a setuptools with ``pkg_resources``, installed once per test
    process (removed when it exits)."""
    target = tempfile.mkdtemp(prefix='setuptools-with-pkg-resources-')
    atexit.register(shutil.rmtree, target, True)
    subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-index', '--no-deps',
                    '--target', target, bootstrap_wheel('setuptools-*.whl')], check=True,
                   timeout=HANG_TIMEOUT)
    return target


def pkg_resources_env() -> dict:
    """Subprocess env with a setuptools that still has ``pkg_resources`` (>= 77.0.3, < 82:
    what upstream mmengine 0.10.7's own package look-up needs) first on ``PYTHONPATH``,
    without changing this venv (installed once per test process)."""
    return {'PYTHONPATH': _setuptools_with_pkg_resources()}


def toolkit_tool_env() -> dict:
    """Subprocess env for a toolkit's own tool reading a config that ``mmevt-swap`` wrote
    (``_base_ = SRC``: no first base importing mmevt, unlike our configs), so mmengine
    resolves SRC before ``custom_imports`` import mmevt: on upstream mmengine 0.10.7 that needs
    ``pkg_resources`` (docs/troubleshooting.md); the fork's mmengine does not."""
    return pkg_resources_env() if current_stack() == 'upstream' else {}


# ------------------------------------------- code that is not EVT's: a plain mmengine run
class RunsCode:
    """A hostile pickle: unpickling it creates the file ``path`` (standing in for any code
    a checkpoint could run), so a test can tell whether it ran."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, 'w'))





def plain_mmengine_runner(work_dir, max_iters=4, interval=2, param_scheduler=None,
                          optimizer=None, custom_hooks=None, by_epoch=False, **runner_kwargs):
    """An mmengine ``Runner`` that knows nothing of EVT: a linear model of its own, a metric,
    generated data (4 iterations an epoch), training that saves a checkpoint and validates
    every ``interval`` iterations (``by_epoch``: epochs; ``max_iters`` then counts epochs),
    as a user's existing pipeline does.

    Returns:
        mmengine.runner.Runner: not yet trained.
    """
    import torch
    from mmengine.evaluator import BaseMetric
    from mmengine.model import BaseModel
    from mmengine.runner import Runner
    from torch.utils.data import DataLoader

    class PlainModel(BaseModel):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 1)

        def forward(self, inputs, data_samples=None, mode='tensor'):
            out = self.linear(torch.stack(inputs))
            if mode == 'loss':
                return {'loss': (out - torch.stack(data_samples)).square().mean()}
            return list(zip(out, data_samples))

    class PlainMetric(BaseMetric):
        def process(self, data_batch, data_samples):
            self.results += [float((o - t).abs().sum()) for o, t in data_samples]

        def compute_metrics(self, results):
            return {'error': sum(results) / len(results)}

    class PlainDataset(list):  # a toolkit dataset's metainfo, which runners save as meta
        metainfo = {'classes': ('a', 'b'), 'palette': [(1, 2, 3)]}

    gen = torch.Generator().manual_seed(0)
    data = PlainDataset(dict(inputs=torch.randn(2, generator=gen),
                             data_samples=torch.randn(1, generator=gen)) for _ in range(8))

    def loader():
        from mmengine.dataset import pseudo_collate
        return DataLoader(data, batch_size=2, collate_fn=pseudo_collate)

    return Runner(
        model=PlainModel(), work_dir=str(work_dir), train_dataloader=loader(),
        val_dataloader=loader(), val_evaluator=[PlainMetric()],
        train_cfg=dict(by_epoch=by_epoch, val_interval=interval,
                       **{'max_epochs' if by_epoch else 'max_iters': max_iters}),
        val_cfg=dict(),
        optim_wrapper=dict(optimizer=optimizer or dict(type='SGD', lr=0.1, momentum=0.9,
                                                       weight_decay=1e-4)),
        param_scheduler=param_scheduler,
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=interval,
                                           by_epoch=by_epoch, save_best='error', rule='less'),
                           logger=dict(type='LoggerHook', interval=1)),
        custom_hooks=custom_hooks, randomness=dict(seed=0),
        experiment_name=f'plain-{os.path.basename(str(work_dir))}', **runner_kwargs)


# ---------------------------------------------------------------- distributed launches
# (tools/dist_train.sh and the Slurm scripts, in test_preemption*.py, test_cluster.py)
FIXTURES = osp.join(REPO, 'tests', 'fixtures')  # pause_until_signalled, dump_stacks_when_stuck
DEMO_DET = osp.join(CONFIGS, 'demo', 'mask-rcnn_evt-demo_fpn_shapes.py')
DEMO_SEG = osp.join(CONFIGS, 'demo', 'fpn_evt-demo_shapes.py')
# gloo's collective timeout in the tests' distributed runs (env_cfg.dist_cfg.timeout, seconds;
# gloo's own default is 30 minutes): a rank whose peer stalls fails in minutes. A run's
# collectives are seconds apart; the longest wait, a peer's checkpoint save or validation
# under CI's load, well under a minute.
COLLECTIVE_TIMEOUT = 300


def job_env(pythonpath: str, cluster=None, toolkit_tool: bool = False, **extra: str) -> dict:
    """The environment of a launch: one thread per process, loopback for gloo, no launch
    variables of the calling shell, ``SLURM_CONF`` of ``cluster``; ``toolkit_tool``: what a
    toolkit's own tools/train.py / test.py need on this stack (:func:`toolkit_tool_env`)."""
    drop = ('MASTER_ADDR', 'MASTER_PORT', 'RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'PORT',
            'NNODES', 'NODE_RANK')
    env = {k: v for k, v in os.environ.items() if not k.startswith('SLURM_') and k not in drop}
    paths = [pythonpath] + ([toolkit_tool_env()['PYTHONPATH']]
                            if toolkit_tool and toolkit_tool_env() else [])
    env.update(PYTHON=sys.executable, PYTHONHASHSEED='0', OMP_NUM_THREADS='1',
               MKL_NUM_THREADS='1', GLOO_SOCKET_IFNAME='lo', PYTHONPATH=':'.join(paths),
               **extra)
    if cluster is not None:
        env['SLURM_CONF'] = cluster.conf
    return env


# A preemptible run of a demo config for tools/dist_train.sh (gloo on the CPU) or the Slurm
# scripts (which add the same overrides, and whose WORK_DIR wins over work_dir): the hook with
# the given signals, the test's pause hook, the stack dump of a stuck run, 2 images a process.
PREEMPTIBLE = '''_base_ = {base!r}
custom_imports = dict(imports=['mmevt', 'pause_until_signalled', 'dump_stacks_when_stuck'],
                      allow_failed_imports=False)
custom_hooks = [dict(type='PreemptionCheckpointHook'{signals})] + {pause}
work_dir = {work!r}
data_root = {root!r}
env_cfg = dict(dist_cfg=dict(backend='gloo', timeout={timeout}))
model_wrapper_cfg = dict(type='MMDistributedDataParallel', device_ids=None)
train_dataloader = dict(batch_size=2, dataset=dict(data_root=data_root))
'''
# the demo segmentation config: IterBasedTrainLoop over mmseg's InfiniteSampler, a persistent
# worker, random resize / crop / flip, BN, the decode head's dropout; 12 iterations of 2
# images a process (8 images: a new pass over the data every 2 iterations), validation after
# iterations 6 and 12
PREEMPTIBLE_SEG = PREEMPTIBLE + '''
val_dataloader = dict(batch_size=2, dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=12, val_interval=6)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(by_epoch=False, interval=12))
'''
# the demo detection config: EpochBasedTrainLoop, a persistent worker, RandomFlip,
# AspectRatioBatchSampler, RPN / R-CNN sampling; 2 epochs of 2 iterations, no validation
PREEMPTIBLE_DET = PREEMPTIBLE + '''
val_dataloader = dict(dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_validation.json')
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=2, val_begin=3)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))
'''
PREEMPTION_KINDS = {  # base, text, last checkpoint, the last iteration a signal may land after
    'seg': (DEMO_SEG, PREEMPTIBLE_SEG, 'iter_12.pth', 9),
    'det': (DEMO_DET, PREEMPTIBLE_DET, 'epoch_2.pth', 2),
}


def write_preemption_config(folder, kind: str, name: str, root: str, pause: list = (),
                            signals: tuple = None) -> str:
    """``folder/NAME.py``: the ``kind`` ('seg' / 'det') preemptible run on the shapes at
    ``root``, working in ``folder/NAME``, with the pause hooks ``pause`` and the hook's
    ``signals`` (None: its defaults)."""
    base, text, _, _ = PREEMPTION_KINDS[kind]
    return write_config(osp.join(folder, f'{name}.py'), text.format(
        base=base, root=root.rstrip('/') + '/', pause=list(pause),
        work=osp.join(folder, name), timeout=COLLECTIVE_TIMEOUT,
        signals='' if signals is None else f', signals={tuple(signals)!r}'))


def assert_same_weights(a: dict, b: dict) -> None:
    import torch
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
