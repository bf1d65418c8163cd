"""A signalled run saves at the next iteration and resumes exactly
(:class:`mmevt.engine.PreemptionCheckpointHook`), without Slurm: a real SIGTERM to the process
group of a ``tools/dist_train.sh`` run, as Slurm sends it to a job's tasks."""
import os
import os.path as osp
import signal
import subprocess
import sys

import pytest
import torch

from helpers import HANG_TIMEOUT, REPO, load_weights, write_config
from slurm_cluster import free_port
from mmevt.engine.preemption import (PREEMPTED_EXIT_CODE, PreemptionCheckpointHook,
                                     sample_seed)

# a hook of the test's own: rank 0 signals its process group (the launcher and both
# ranks, as Slurm signals every task) after a given iteration, so the signal lands mid-epoch
SIGNAL_AT = '''
import os, signal
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

@HOOKS.register_module()
class SignalProcessGroupAt(Hook):
    priority = 'NORMAL'  # before PreemptionCheckpointHook (LOWEST) in the same iteration

    def __init__(self, iteration):
        self.iteration = iteration

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if runner.iter == self.iteration and runner.rank == 0:
            os.killpg(os.getpgid(0), signal.SIGTERM)
'''


@pytest.fixture(scope='module')
def cls_root(tmp_path_factory):
    from mmevt.datasets import generate_shape_classes
    root = str(tmp_path_factory.mktemp('cls'))
    generate_shape_classes(root, num_train=2, num_val=1, img_size=(64, 64))  # 12 images
    return root


def _config(tmp_path, cls_root, name, extra=''):
    from cls_tiny import tiny_cls_config
    # random crops and flips in a persistent worker, 2 epochs of 3 iterations per process;
    # GroupNorm and no drop path: the run is a function of its data and seeds
    text = tiny_cls_config(cls_root, str(tmp_path / name)) + f'''
model['backbone'].update(drop_path_rate=0., norm_cfg=dict(type='GN', num_groups=1))
model['neck'] = dict(_delete_=True, type='GlobalAveragePooling')
model['head']['in_channels'] = 128
model['train_cfg'] = None
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=64, backend='pillow'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader['dataset']['pipeline'] = train_pipeline
train_dataloader.update(batch_size=2, num_workers=1, persistent_workers=True,
                        sampler=dict(type='DefaultSampler', shuffle=True))
train_cfg = dict(max_epochs=2, val_interval=10)
randomness = dict(seed=0, deterministic=True)
env_cfg = dict(dist_cfg=dict(backend='gloo'))
model_wrapper_cfg = dict(type='MMDistributedDataParallel', device_ids=None)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
custom_hooks = [dict(type='PreemptionCheckpointHook')]
''' + extra
    return write_config(tmp_path / f'{name}.py', text)


def _dist_train(cfg, *args, tmp_path):
    """``tools/dist_train.sh CFG 2`` in its own session (its own process group), on a port
    free now (a fixed one can be held by another run on the machine)."""
    env = dict(os.environ, PYTHON=sys.executable, PORT=str(free_port()), OMP_NUM_THREADS='1',
               PYTHONPATH=f'{tmp_path}{os.pathsep}{os.environ.get("PYTHONPATH", "")}')
    return subprocess.run(['bash', 'tools/dist_train.sh', cfg, '2', *args], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=HANG_TIMEOUT, start_new_session=True)


@pytest.fixture(scope='module')
def plain_weights(tmp_path_factory, cls_root) -> dict:
    """The weights of the config's uninterrupted 2-process run (the hook on, no signal)."""
    folder = tmp_path_factory.mktemp('preempt_plain')
    plain = _dist_train(_config(folder, cls_root, 'plain'), tmp_path=folder)
    assert plain.returncode == 0, plain.stdout[-4000:]
    return load_weights(folder / 'plain' / 'epoch_2.pth')


@pytest.mark.e2e
def test_a_sigtermed_dist_run_saves_exits_and_resumes_exactly(tmp_path, cls_root,
                                                              plain_weights):
    (tmp_path / 'signal_at.py').write_text(SIGNAL_AT)
    # iteration index 4: epoch 2, its batch 2 of 3 done
    signalled = _config(tmp_path, cls_root, 'signalled', extra='''
custom_imports = dict(imports=['mmevt', 'signal_at'], allow_failed_imports=False)
custom_hooks.append(dict(type='SignalProcessGroupAt', iteration=4))
''')
    stopped = _dist_train(signalled, tmp_path=tmp_path)
    work = tmp_path / 'signalled'
    assert 'SIGTERM received; saving preempted_iter_5.pth at epoch 1, iteration 5, batch 2' \
        in stopped.stdout, stopped.stdout[-4000:]
    assert f'exitcode: {PREEMPTED_EXIT_CODE}' in stopped.stdout or stopped.returncode != 0
    assert (work / 'last_checkpoint').read_text() == str(work / 'preempted_iter_5.pth')
    assert not (work / 'epoch_2.pth').exists()
    # the same config, resumed (the signal hook fires at iteration 4 only: not again)
    resumed = _dist_train(signalled, '--resume', tmp_path=tmp_path)
    assert resumed.returncode == 0, resumed.stdout[-4000:]
    assert 'resuming the run stopped by SIGTERM at epoch 1, iteration 5, batch 2' in (
        resumed.stdout)
    a, b = plain_weights, load_weights(work / 'epoch_2.pth')
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # the negative control: resumed one batch early, the same check fails
    ckpt = torch.load(work / 'preempted_iter_5.pth', map_location='cpu')
    ckpt['meta']['preemption']['batch_idx'] -= 1
    early = tmp_path / 'early'
    early.mkdir()
    torch.save(ckpt, early / 'preempted_iter_5.pth')
    (early / 'last_checkpoint').write_text(str(early / 'preempted_iter_5.pth'))
    again = _dist_train(signalled, '--resume', '--work-dir', str(early),
                        tmp_path=tmp_path)
    assert again.returncode == 0, again.stdout[-4000:]
    c = load_weights(early / 'epoch_2.pth')
    assert any(not torch.equal(a[k], c[k]) for k in a)


@pytest.mark.e2e
def test_without_a_signal_the_hook_changes_no_weight_unless_it_seeds_samples(
        tmp_path, cls_root, plain_weights):
    # the same run without the hook; with it but seed_samples=False it trains bitwise the
    # same, with its default per-sample seeds it draws other crops and flips (the control)
    weights = {}
    for name, hooks in (('without', '[]'),
                        ('unseeded', "[dict(type='PreemptionCheckpointHook', "
                                     "seed_samples=False)]")):
        cfg = _config(tmp_path, cls_root, name, extra=f'custom_hooks = {hooks}\n')
        run = _dist_train(cfg, tmp_path=tmp_path)
        assert run.returncode == 0, run.stdout[-4000:]
        assert ('PreemptionCheckpointHook' in run.stdout) == (name == 'unseeded')
        weights[name] = load_weights(tmp_path / name / 'epoch_2.pth')
    assert weights['without'].keys() == weights['unseeded'].keys() == plain_weights.keys()
    for k in plain_weights:
        assert torch.equal(weights['without'][k], weights['unseeded'][k]), k
    assert any(not torch.equal(weights['without'][k], plain_weights[k]) for k in plain_weights)


def test_the_hook_refuses_what_it_cannot_use():
    with pytest.raises(ValueError, match="'SIGNOPE', which is no signal"):
        PreemptionCheckpointHook(signals=('SIGNOPE', ))
    with pytest.raises(ValueError, match='exit_code must be an int in 1..255, got 0'):
        PreemptionCheckpointHook(exit_code=0)
    with pytest.raises(ValueError, match='signals is empty'):
        PreemptionCheckpointHook(signals=())


def test_sample_seeds_depend_on_seed_epoch_and_index_only():
    seeds = {sample_seed(s, e, i) for s in (0, 1) for e in (0, 1) for i in range(50)}
    assert len(seeds) == 200 and sample_seed(3, 1, 7) == sample_seed(3, 1, 7)


def test_a_python_handler_installed_before_is_chained_and_restored():
    called = []
    previous = signal.signal(signal.SIGUSR1, lambda n, f: called.append(n))
    try:
        hook = PreemptionCheckpointHook(signals=('SIGUSR1', ))
        hook.before_run(None)
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)  # a second signal changes nothing
        assert hook.received == signal.SIGUSR1 and called == [signal.SIGUSR1] * 2
        hook.after_run(None)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert called == [signal.SIGUSR1] * 3
    finally:
        signal.signal(signal.SIGUSR1, previous)
