"""A signalled run saves at the next iteration boundary, exits with the preemption code and
resumes exactly (:class:`mmevt.engine.PreemptionCheckpointHook`), without Slurm: real SIGTERM /
SIGUSR1 to a ``tools/dist_train.sh`` run (2 processes, gloo, one dataloader worker each), sent
to the launcher's process group (what ``kill -TERM -PGID`` does; torchrun's ranks lead their
own groups, so the launcher forwards it) or to every process of the run in a random order
(what Slurm does to a step: launcher, ranks and workers), for the iteration-based demo
segmentation config (mmseg, InfiniteSampler) and the epoch-based demo detection config
(mmdet), at an iteration drawn at random (printed with the seed that replays it,
``MMEVT_TEST_SEED``), and during validation. Each resumed run ends with the uninterrupted
run's weights, bitwise; a resume edited to start one step off does not (the control)."""
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from helpers import (COLLECTIVE_TIMEOUT, FIXTURES, HANG_TIMEOUT, PREEMPTION_KINDS, REPO,
                     assert_same_weights, load_weights, write_config, write_preemption_config)
from slurm_cluster import free_port
from mmevt.apis.torchrun import child_pids, exit_code_of
from mmevt.engine.preemption import PREEMPTED_EXIT_CODE, PreemptionCheckpointHook
from mmevt.engine.sample_stream import SampleIndex, sample_seed

# a run that has not ended this long after it started is stuck (the runs take under a
# minute, a few under CI's load): its processes write their stacks, it is stopped, it fails.
# Below the runs' collective timeout, so that a rank stalled in a collective is still there
# to write its stack.
STUCK_AFTER = COLLECTIVE_TIMEOUT - 60
STACKS_SIGNAL = signal.SIGQUIT  # tests/fixtures/dump_stacks_when_stuck.py; no hook's signal here


def _env(tmp_path) -> dict:
    """A launch's environment: a port free now, one thread a process, the fixtures and the
    test's configs importable, the folder for stacks of a stuck run."""
    return dict(os.environ, PYTHON=sys.executable, PORT=str(free_port()), OMP_NUM_THREADS='1',
                MMEVT_STACKS_DIR=str(tmp_path / 'stacks'),
                PYTHONPATH=os.pathsep.join([str(tmp_path), FIXTURES,
                                            os.environ.get('PYTHONPATH', '')]))


def _descendants(pid: int) -> list:
    found, todo = [], [pid]
    while todo:
        children = child_pids(todo.pop())
        found += children
        todo += children
    return found


def _kill(pids: list, number: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, number)
        except ProcessLookupError:  # it ended meanwhile
            pass


def _stop_stuck(proc: subprocess.Popen, stuck: list) -> None:
    """Every process under the launcher writes its stacks (:data:`STACKS_SIGNAL`,
    ``tests/fixtures/dump_stacks_when_stuck.py``), then all of them are killed."""
    if proc.poll() is not None:  # it ended as the time ran out
        return
    stuck.append(True)
    processes = _descendants(proc.pid)
    _kill(processes, STACKS_SIGNAL)
    time.sleep(2)  # the stacks are written
    _kill([proc.pid] + processes, signal.SIGKILL)


def _stacks(folder: Path) -> str:
    """The stacks a stuck run's processes wrote to ``folder``, one block a process."""
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    return ''.join(f'\n[test] stacks of pid {f.stem}:\n{f.read_text()}' for f in files
                   if f.stat().st_size)


def _dist_train(cfg, *args, tmp_path, on_line=None) -> subprocess.CompletedProcess:
    """``tools/dist_train.sh CFG 2 ARGS`` in its own session (its own process group); each
    output line goes to ``on_line(proc, line)``, which returns what to add to the output.
    The completed process, its output in ``stdout``, a stuck run's stacks after it."""
    env = _env(tmp_path)
    proc = subprocess.Popen(['bash', 'tools/dist_train.sh', cfg, '2', *args], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    stuck = []
    watchdog = threading.Timer(STUCK_AFTER, _stop_stuck, (proc, stuck))
    watchdog.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if on_line is not None:
                lines.append(on_line(proc, line))
        proc.wait()
    finally:
        watchdog.cancel()
    if stuck:
        lines.append(f'[test] stuck: stopped after {STUCK_AFTER} s\n'
                     + _stacks(Path(env['MMEVT_STACKS_DIR'])))
    return subprocess.CompletedProcess(proc.args, proc.returncode, ''.join(lines))


def _signalled_dist_train(cfg, number: int, delivery: str, rng: random.Random, tmp_path):
    """``tools/dist_train.sh CFG 2``; once rank 0 holds (``PauseUntilSignalled``), signal
    ``number`` goes to the launcher's process group (``delivery='group'``) or to the
    launcher, every rank and every dataloader worker in a random order (``'tree'``).
    The completed process, its output in ``stdout``."""
    sent = []

    def send(proc, line: str) -> str:
        if sent or not line.startswith('PauseUntilSignalled: holding'):
            return ''
        sent.append(True)
        if delivery == 'group':
            os.killpg(proc.pid, number)
            return ''
        processes = [proc.pid] + _descendants(proc.pid)
        rng.shuffle(processes)
        for pid in processes:
            os.kill(pid, number)
        return (f'[test] {signal.Signals(number).name} to {len(processes)} processes in '
                f'the order {processes}\n')

    return _dist_train(cfg, tmp_path=tmp_path, on_line=send)


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory, shapes_root) -> dict:
    """kind -> the weights of its uninterrupted run (the hook on, no signal)."""
    weights = {}
    for kind, (_, _, last, _) in PREEMPTION_KINDS.items():
        folder = tmp_path_factory.mktemp(f'preempt_plain_{kind}')
        cfg = write_preemption_config(folder, kind, 'plain', shapes_root)
        plain = _dist_train(cfg, tmp_path=folder)
        assert plain.returncode == 0, plain.stdout[-6000:]
        weights[kind] = load_weights(folder / 'plain' / last)
    return weights


def _where(kind: str, iteration: int) -> str:
    """How the hook's log names the state after ``iteration`` trained iterations."""
    if kind == 'seg':
        return f'iteration {iteration}'
    epoch, batch = divmod(iteration, 2)  # 2 iterations an epoch
    return f'epoch {epoch}, iteration {iteration}, batch {batch} of the epoch'


def _pause(iteration: int, during: str = 'train') -> list:
    return [dict(type='PauseUntilSignalled', iteration=iteration, timeout=HANG_TIMEOUT,
                 during=during)]


@pytest.mark.e2e
@pytest.mark.parametrize('kind, name, delivery, during, signals', [
    ('seg', 'SIGTERM', 'group', 'train', None),  # the hook's defaults: SIGTERM, SIGUSR1
    ('seg', 'SIGUSR1', 'tree', 'train', None),
    ('seg', 'SIGTERM', 'tree', 'val', None),
    ('det', 'SIGUSR2', 'group', 'train', ('SIGUSR2', )),  # a config's own choice
    ('det', 'SIGTERM', 'tree', 'train', None),
])
def test_a_signalled_dist_run_saves_exits_and_resumes_exactly(kind, name, delivery, during,
                                                              signals, tmp_path, shapes_root,
                                                              uninterrupted):
    number = signal.Signals[name]
    seed = int(os.environ.get('MMEVT_TEST_SEED', time.time_ns() % 2**32))
    rng = random.Random(seed)
    _, _, last, latest = PREEMPTION_KINDS[kind]
    # the iteration whose end the signal finds the run at (runner.iter, counted from 0); in
    # validation: the one after iteration 6, and the save comes after it
    held = 6 if during == 'val' else rng.randint(0, latest)
    print(f'\n{kind}: {name} to the {delivery} while holding in '
          f'{during} at iteration {held} (MMEVT_TEST_SEED={seed} replays it)')
    saved = held if during == 'val' else held + 1
    cfg = write_preemption_config(tmp_path, kind, 'signalled', shapes_root,
                                  _pause(held, during), signals)
    stopped = _signalled_dist_train(cfg, number, delivery, rng, tmp_path)
    work = tmp_path / 'signalled'
    out = stopped.stdout
    assert stopped.returncode == PREEMPTED_EXIT_CODE, out[-6000:]
    assert (f'{name} received; saving preempted_iter_{saved}.pth at {_where(kind, saved)}, '
            f'then exiting with {PREEMPTED_EXIT_CODE}') in out, out[-6000:]
    assert 'killed by signal' not in out, out[-6000:]
    assert (work / 'last_checkpoint').read_text() == str(work / f'preempted_iter_{saved}.pth')
    assert not (work / last).exists()
    # the same config resumed (the pause hook holds at an iteration the resumed run has
    # passed, or in a validation it does not run again)
    resumed = _dist_train(cfg, '--resume', tmp_path=tmp_path)
    assert resumed.returncode == 0, resumed.stdout[-6000:]
    assert f'resuming the run stopped by {name} at {_where(kind, saved)}' in resumed.stdout
    assert_same_weights(uninterrupted[kind], load_weights(work / last))
    if (delivery, during) != ('group', 'train'):
        return
    # the negative control (once a kind): resumed one step off, the same check fails
    ckpt = torch.load(work / f'preempted_iter_{saved}.pth', map_location='cpu',
                      weights_only=False)
    state = ckpt['meta']['preemption']
    if state['by_epoch']:
        state['batch_idx'] = 1 - state['batch_idx']  # a batch trained twice or skipped
    else:
        state['iter'] = ckpt['meta']['iter'] = saved - 1  # an iteration trained twice
    off = tmp_path / 'off'
    off.mkdir()
    torch.save(ckpt, off / f'preempted_iter_{saved}.pth')
    (off / 'last_checkpoint').write_text(str(off / f'preempted_iter_{saved}.pth'))
    # (without the pause hook, which would hold at the iteration trained again)
    plain = write_preemption_config(tmp_path, kind, 'plain', shapes_root)
    again = _dist_train(plain, '--resume', '--work-dir', str(off), tmp_path=tmp_path)
    assert again.returncode == 0, again.stdout[-6000:]
    wrong = load_weights(off / last)
    assert any(not torch.equal(uninterrupted[kind][k], wrong[k]) for k in wrong)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper has ended)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


@pytest.mark.e2e
@pytest.mark.parametrize('name, signals, launcher_code', [
    # outside torchrun's --signals-to-handle: the launcher dies of it
    ('SIGUSR2', None, -signal.SIGUSR2),
    # torchrun's own: it signals the ranks, which die of it, and exits 1
    ('SIGTERM', ('SIGUSR2', ), 1),
])
def test_a_signal_the_hook_does_not_list_keeps_torchruns_handling_and_ends_every_rank(
        name, signals, launcher_code, tmp_path, shapes_root):
    number = signal.Signals[name]
    cfg = write_preemption_config(tmp_path, 'seg', 'unlisted', shapes_root, _pause(0), signals)
    ranks = []

    def send(proc, line: str) -> str:
        if ranks or not line.startswith('PauseUntilSignalled: holding'):
            return ''
        ranks.extend(_descendants(proc.pid))
        os.killpg(proc.pid, number)
        return f'[test] {name} to the launcher\'s group; its processes: {ranks}\n'

    run = _dist_train(cfg, tmp_path=tmp_path, on_line=send)
    assert run.returncode == launcher_code, run.stdout[-6000:]
    # the output closes when the last rank has ended: they ended with the launcher
    deadline = time.monotonic() + 60  # dataloader workers poll for their rank every 5 s
    while any(_alive(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ranks and not [pid for pid in ranks if _alive(pid)], run.stdout[-6000:]
    assert 'received; saving' not in run.stdout
    assert not list((tmp_path / 'unlisted').glob('preempted_iter_*.pth'))


@pytest.mark.e2e
def test_a_hook_signal_no_launcher_can_forward_is_refused_at_start(tmp_path, shapes_root):
    cfg = write_preemption_config(tmp_path, 'det', 'cont', shapes_root, signals=('SIGCONT', ))
    refused = _dist_train(cfg, tmp_path=tmp_path)
    assert refused.returncode != 0
    assert ("mmevt.apis.torchrun: the config's PreemptionCheckpointHook: signals has SIGCONT, "
            'which cannot ask a run to stop') in refused.stdout, refused.stdout[-4000:]
    assert not (tmp_path / 'cont').exists()  # no rank started
    # the Slurm scripts ask the same question before they submit
    sbatch = subprocess.run([sys.executable, '-m', 'mmevt.apis.run_signals', '--sbatch', cfg],
                            cwd=REPO, capture_output=True, text=True)
    assert sbatch.returncode != 0 and 'has SIGCONT' in sbatch.stderr, sbatch.stderr


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
    text = tiny_cls_config(cls_root, str(tmp_path / name)) + '''
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
env_cfg = dict(dist_cfg=dict(backend='gloo', timeout=''' + str(COLLECTIVE_TIMEOUT) + '''))
model_wrapper_cfg = dict(type='MMDistributedDataParallel', device_ids=None)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
custom_hooks = [dict(type='PreemptionCheckpointHook')]
custom_imports = dict(imports=['mmevt', 'dump_stacks_when_stuck'], allow_failed_imports=False)
''' + extra
    return write_config(tmp_path / f'{name}.py', text)


@pytest.fixture(scope='module')
def plain_weights(tmp_path_factory, cls_root) -> dict:
    """The weights of the config's uninterrupted 2-process run (the hook on, no signal)."""
    folder = tmp_path_factory.mktemp('preempt_plain')
    plain = _dist_train(_config(folder, cls_root, 'plain'), tmp_path=folder)
    assert plain.returncode == 0, plain.stdout[-4000:]
    return load_weights(folder / 'plain' / 'epoch_2.pth')


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
    for name in ('SIGKILL', 'SIGSTOP', 'SIGCHLD', 'SIGCONT', 'SIGSEGV', 'SIGPIPE'):
        with pytest.raises(ValueError, match=f'has {name}, which cannot ask a run to stop'):
            PreemptionCheckpointHook(signals=('SIGTERM', name))
    assert PreemptionCheckpointHook(signals=('USR2', 'SIGUSR2', 10)).signals == [12, 10]


def test_the_launchers_read_the_stop_signals_from_the_run_s_config(tmp_path):
    from mmevt.apis.run_signals import sbatch_signal, stop_signals_of_run
    from mmevt.apis.torchrun import torchrun_signals
    hook = "custom_hooks = [dict(type='mmevt.PreemptionCheckpointHook'{})]\n"
    configs = {'default': hook.format(''), 'usr2': hook.format(", signals=['SIGUSR2']"),
               'none': 'custom_hooks = []\n'}
    for name, text in configs.items():
        write_config(tmp_path / f'{name}.py', text)
    read = {name: stop_signals_of_run([str(tmp_path / f'{name}.py'), '--launcher', 'pytorch'])
            for name in configs}
    assert read == {'default': (signal.SIGTERM, signal.SIGUSR1), 'usr2': (signal.SIGUSR2, ),
                    'none': ()}
    # --cfg-options win, as in the run; no config among the arguments: None
    assert stop_signals_of_run([str(tmp_path / 'default.py'), '--cfg-options',
                                'custom_hooks.0.signals=[SIGHUP]']) == (signal.SIGHUP, )
    assert stop_signals_of_run(['--launcher', 'pytorch']) is None
    # Slurm's early signal: the first that is not SIGTERM (it comes at the limit anyway)
    assert [sbatch_signal(read[n]) for n in ('default', 'usr2', 'none')] == ['USR1', 'USR2', '']
    assert sbatch_signal((signal.SIGTERM, )) == 'TERM'
    # torchrun keeps handling what is not forwarded
    assert torchrun_signals('SIGTERM,SIGINT,SIGHUP,SIGQUIT', read['default']) == \
        'SIGINT,SIGHUP,SIGQUIT'
    assert torchrun_signals('SIGTERM,SIGINT,SIGHUP,SIGQUIT', read['usr2']) == \
        'SIGTERM,SIGINT,SIGHUP,SIGQUIT'


def test_a_guarded_rank_ends_when_its_launcher_is_killed(tmp_path):
    from mmevt.apis.torchrun import LAUNCHER_PID_ENV, RANK_GUARD
    # a launcher that starts one rank through the guard (the rank sleeps), then waits
    launcher = subprocess.Popen([sys.executable, '-c', f"""
import os, subprocess, sys, time
os.environ[{LAUNCHER_PID_ENV!r}] = str(os.getpid())
rank = subprocess.Popen([sys.executable, '-u', {RANK_GUARD!r}, '-c',
                         'import time; print("rank up", flush=True); time.sleep(600)'],
                        start_new_session=True)
print(rank.pid, flush=True)
time.sleep(600)
"""], stdout=subprocess.PIPE, text=True)
    try:
        lines = {launcher.stdout.readline().strip() for _ in range(2)}
        assert 'rank up' in lines  # the guard exec'd the rank
        rank = int((lines - {'rank up'}).pop())
        assert rank in child_pids(launcher.pid)  # the same pid, still the launcher's child
    finally:
        launcher.kill()
        launcher.wait()
    deadline = time.monotonic() + HANG_TIMEOUT
    while _alive(rank):
        assert time.monotonic() < deadline
        time.sleep(0.05)


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


def test_sample_indices_carry_the_epoch_of_their_draw():
    import pickle

    from mmengine.dataset import DefaultSampler, InfiniteSampler
    from torch.utils.data import BatchSampler

    from mmevt.engine.sample_stream import PreemptibleBatches
    data = list(range(4))
    # one __iter__ for the whole run: an epoch per len(sampler) draws
    infinite = InfiniteSampler(data, shuffle=True, seed=0)
    batches = iter(PreemptibleBatches(BatchSampler(infinite, 2, False), infinite, tag=True))
    drawn = [next(batches) for _ in range(6)]
    assert [[i.epoch for i in b] for b in drawn] == [[0, 0], [0, 0], [1, 1], [1, 1],
                                                     [2, 2], [2, 2]]
    assert sorted(sum(drawn[2:4], [])) == data  # the second pass is a pass over the data
    again = pickle.loads(pickle.dumps(drawn[5][0]))  # as it travels to a worker
    assert isinstance(again, SampleIndex) and (again, again.epoch) == (drawn[5][0], 2)
    # an epoch sampler: the epoch it is set to; skipped batches are not yielded
    sampler = DefaultSampler(data, shuffle=True, seed=0)
    sampler.set_epoch(3)
    batches = list(PreemptibleBatches(BatchSampler(sampler, 2, False), sampler, tag=True,
                                       skip=1))
    assert len(batches) == 1 and {i.epoch for i in batches[0]} == {3}
    # untagged: the wrapped batch sampler's plain indices
    plain = list(PreemptibleBatches(BatchSampler(sampler, 2, False), sampler, tag=False))
    assert not any(isinstance(i, SampleIndex) for b in plain for i in b)


def test_the_seeded_pipeline_draws_by_the_epoch_of_the_index():
    import multiprocessing

    from mmevt.engine.sample_stream import SeededPipeline
    pipeline = SeededPipeline(lambda info: torch.rand(1).item(), seed=0,
                              epoch=multiprocessing.Value('i', 0, lock=False))
    draws = [pipeline(dict(sample_idx=SampleIndex(5, epoch)))
             for epoch in (0, 1, 0)]
    assert draws[0] == draws[2] != draws[1]
    assert pipeline(dict(sample_idx=5)) == draws[0]  # untagged: the runner's epoch (0)


def test_the_launcher_finds_its_ranks_and_exits_75_only_when_every_failed_rank_did():
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure
    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        assert child.pid in child_pids(os.getpid())
    finally:
        child.kill()
        child.wait()

    def failures(*codes):
        return {rank: ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=code,
                                     error_file='<N/A>') for rank, code in enumerate(codes)}
    assert exit_code_of(failures(PREEMPTED_EXIT_CODE, PREEMPTED_EXIT_CODE)) == 75
    assert exit_code_of(failures(PREEMPTED_EXIT_CODE)) == 75  # the other rank exited 0
    assert exit_code_of(failures(PREEMPTED_EXIT_CODE, -15)) == 1
    assert exit_code_of(failures(1)) == 1
