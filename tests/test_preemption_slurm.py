"""Preemption on a real Slurm: ``SBATCH=1 tools/slurm_train.sh`` (``tools/slurm_train.sbatch``)
signalled mid-epoch by ``scancel --signal=TERM`` or ``--signal=USR1``, or by its time limit
(``--signal=USR2@120``, the early signal the config's hook chose), saves, requeues itself,
resumes and ends with the weights of an uninterrupted run.

The signalled run holds at the end of its first iteration until the signal has reached
its rank (``PauseUntilSignalled``, tests/fixtures), so that it lands mid-epoch whatever the
machine's speed; the resumed run never holds. The cluster is the session's ``slurm_cluster`` (``tests/slurm_cluster.py``; its slurm.conf
lowers ``AuthInfo=cred_expire`` to 10 s, the wait before a requeued job may start again). The
config is the demo detection config as it is (a persistent dataloader worker, RandomFlip,
AspectRatioBatchSampler, RPN / R-CNN random sampling, BN) with ``PreemptionCheckpointHook``,
on the session's 8 generated shapes: 2 tasks, 2 images a task and iteration, 2 iterations an
epoch, 2 epochs; every launch ``OMP_NUM_THREADS=1``, its own ``MASTER_PORT``.
"""
import os
import os.path as osp
import re
import subprocess
import time

import pytest
import torch

from helpers import (FIXTURES, HANG_TIMEOUT, PREEMPTION_KINDS, REPO, assert_same_weights, job_env,
                     load_weights, write_preemption_config)
from slurm_cluster import free_port

IN_CLUSTER = pytest.mark.xdist_group('slurm')  # the cluster tests' group: one cluster a run

ENDED = ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY',
         'BOOT_FAIL', 'DEADLINE')


@pytest.fixture(scope='module')
def preempt_configs(shapes_root, tmp_path_factory) -> dict:
    """The demo detection config, preemptible (``helpers.write_preemption_config``): 'plain',
    'signalled' (held at its first iteration until the hook has a signal) and
    'signalled_usr2' (the same, its hook stopping on SIGUSR2 only) -> a config;
    'pythonpath': where they and the fixtures (``tests/fixtures``) are."""
    folder = tmp_path_factory.mktemp('preempt_slurm')
    pause = [dict(type='PauseUntilSignalled', iteration=0, timeout=HANG_TIMEOUT)]
    cfgs = {name: write_preemption_config(folder, 'det', name, shapes_root, *args)
            for name, args in (('plain', ()), ('signalled', (pause, )),
                               ('signalled_usr2', (pause, ('SIGUSR2', ))))}
    cfgs['pythonpath'] = f'{folder}:{FIXTURES}'
    return cfgs


def submit(cluster, cfg: str, pythonpath: str, work: str, name: str, sbatch: str = '',
           early: str = 'USR1') -> str:
    """``SBATCH=1 tools/slurm_train.sh`` on 2 tasks of one node (``sbatch``: more
    ``SBATCH_ARGS``; ``early``: the signal the config's hook makes it ask for); the job
    id."""
    os.makedirs(work, exist_ok=True)
    env = job_env(pythonpath, cluster, SBATCH='1', GPUS='2', GPUS_PER_NODE='0',
                  MASTER_PORT=str(free_port()), SRUN_ARGS='--nodes=1',
                  SBATCH_ARGS=f'--nodes=1 --output={work}/slurm.out {sbatch}')
    proc = subprocess.run(['bash', 'tools/slurm_train.sh', cluster.partition, name, cfg, work],
                          cwd=REPO, env=env, timeout=120, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the command it submitted: requeueable, appending, the hook's early signal to the tasks,
    # resume on
    assert re.search(r'sbatch --parsable -p cpu --job-name=\S+ --ntasks=2 --cpus-per-task=1 '
                     rf'--requeue --open-mode=append --signal={early}@120 .*slurm_train\.sbatch '
                     r'srun .*--launcher=slurm .*--resume', proc.stderr), proc.stderr
    return proc.stdout.strip().split(';')[0]


def job_field(cluster, job: str, key: str) -> str:
    out = cluster.run('scontrol', 'show', 'job', job)
    return re.search(rf'\b{key}=(\S*)', out).group(1)


def wait_job(cluster, job: str) -> str:
    """Wait for the job to end (a requeue is no end); its JobState."""
    deadline = time.monotonic() + HANG_TIMEOUT
    while (state := job_field(cluster, job, 'JobState')) not in ENDED:
        assert time.monotonic() < deadline, f'job {job} still {state}'
        time.sleep(1)
    return state


def iterations(log: str) -> list:
    """(epoch, the rest of the line: lr, times left out, losses) of each iteration line."""
    lines = re.findall(r'Epoch\(train\) \[(\d+)\]\[\d+/\d+\]\s+(.*)', log)
    return [(epoch, re.sub(r' (eta|time|data_time): \S+', '', rest)) for epoch, rest in lines]


def read(path: str) -> str:
    return open(path, errors='replace').read() if osp.exists(path) else ''


@pytest.fixture(scope='module')
def uninterrupted(slurm_cluster, preempt_configs, tmp_path_factory) -> tuple:
    """The batch job without a signal: (work dir, log, wall seconds)."""
    work = str(tmp_path_factory.mktemp('preempt_plain'))
    start = time.monotonic()
    job = submit(slurm_cluster, preempt_configs['plain'], preempt_configs['pythonpath'], work,
                 'evt-plain')
    state = wait_job(slurm_cluster, job)
    log = read(osp.join(work, 'slurm.out'))
    assert state == 'COMPLETED', log[-6000:]
    assert job_field(slurm_cluster, job, 'Restarts') == '0'
    return work, log, time.monotonic() - start


def assert_requeued_and_resumed(cluster, job: str, work: str, uninterrupted: tuple,
                                name: str) -> None:
    """The job, signalled by ``name`` at its first iteration (held there by
    ``PauseUntilSignalled``), saved, was requeued once, resumed in the same output file and
    ended with the weights of the uninterrupted run, iteration by iteration the same
    losses."""
    log = read(osp.join(work, 'slurm.out'))
    assert job_field(cluster, job, 'JobState') == 'COMPLETED', log[-6000:]
    assert job_field(cluster, job, 'Restarts') == '1'
    # one file, appended to: the first start, the save, the exit code, the requeue, the resume
    first, _, second = log.partition(f'mmevt: job {job} start 1 ')
    assert second, log[-6000:]
    assert f'mmevt: job {job} start 0 ' in first
    assert (f'PreemptionCheckpointHook: {name} received; saving preempted_iter_1.pth at epoch 0, '
            'iteration 1, batch 1 of the epoch, then exiting with 75') in first, first[-6000:]
    assert f'mmevt: job {job}: srun exited 75 (preempted, checkpoint saved): requeueing' in first
    assert (f'PreemptionCheckpointHook: resuming the run stopped by {name} at epoch 0, '
            'iteration 1, batch 1 of the epoch') in second, second[-6000:]
    # iteration by iteration the same epoch, lr and losses as the uninterrupted run: 1 before
    # the signal, 3 after it (the trained batch is not trained again). mmengine numbers the
    # batches of the resumed epoch from 1 again, so the batch number is left out.
    assert len(iterations(first)) == 1 and len(iterations(second)) == 3, second[-6000:]
    assert iterations(first) + iterations(second) == iterations(uninterrupted[1])
    assert f'mmevt: job {job}: srun exited 0' in second
    assert read(osp.join(work, 'last_checkpoint')) == osp.join(work, 'epoch_2.pth')
    plain = load_weights(osp.join(uninterrupted[0], 'epoch_2.pth'))
    assert_same_weights(plain, load_weights(osp.join(work, 'epoch_2.pth')))


def wait_training(cluster, job: str, work: str, line: str = 'Epoch(train) [1][1/2]') -> None:
    """Wait for ``line`` in the job's output (by default its first iteration's: the run then
    holds for the signal)."""
    out = osp.join(work, 'slurm.out')
    deadline = time.monotonic() + HANG_TIMEOUT
    while line not in read(out):
        assert job_field(cluster, job, 'JobState') not in ENDED, read(out)[-6000:]
        assert time.monotonic() < deadline, read(out)[-6000:]
        time.sleep(0.5)


@IN_CLUSTER
@pytest.mark.e2e
def test_a_sigterm_signalled_batch_job_requeues_resumes_and_matches(
        slurm_cluster, preempt_configs, uninterrupted, tmp_path):
    work = str(tmp_path / 'signalled')
    start = time.monotonic()
    job = submit(slurm_cluster, preempt_configs['signalled'], preempt_configs['pythonpath'],
                 work, 'evt-preempt')
    wait_training(slurm_cluster, job, work)  # held at its first iteration
    signalled = time.monotonic()
    # the hook's default SIGTERM, to the tasks, not the batch shell (scancel without --signal
    # would cancel the job)
    slurm_cluster.run('scancel', '--signal=TERM', job)
    wait_job(slurm_cluster, job)
    assert_requeued_and_resumed(slurm_cluster, job, work, uninterrupted, 'SIGTERM')
    print(f'\nWALL uninterrupted {uninterrupted[2]:.1f} s, signalled + requeued '
          f'{time.monotonic() - start:.1f} s (signal after {signalled - start:.1f} s)')

    # the negative control: the preemption checkpoint edited to resume one batch early; a
    # batch job that resumes from it fails the same check
    ckpt = torch.load(osp.join(work, 'preempted_iter_1.pth'), map_location='cpu',
                      weights_only=False)
    ckpt['meta']['preemption']['batch_idx'] -= 1
    early = str(tmp_path / 'early')
    os.makedirs(early)
    torch.save(ckpt, osp.join(early, 'preempted_iter_1.pth'))
    with open(osp.join(early, 'last_checkpoint'), 'w') as f:
        f.write(osp.join(early, 'preempted_iter_1.pth'))
    job = submit(slurm_cluster, preempt_configs['plain'], preempt_configs['pythonpath'], early,
                 'evt-early')
    state = wait_job(slurm_cluster, job)
    log = read(osp.join(early, 'slurm.out'))
    assert state == 'COMPLETED', log[-6000:]
    assert 'resuming the run stopped by SIGTERM at epoch 0, iteration 1, batch 0' in log
    plain = load_weights(osp.join(uninterrupted[0], 'epoch_2.pth'))
    wrong = load_weights(osp.join(early, 'epoch_2.pth'))
    assert any(not torch.equal(plain[k], wrong[k]) for k in plain)


@IN_CLUSTER
@pytest.mark.e2e
def test_a_batch_job_at_its_time_limit_requeues_resumes_and_matches(
        slurm_cluster, preempt_configs, uninterrupted, tmp_path):
    # a hook that stops on SIGUSR2 only (SIGTERM keeps its meaning): the job asks for
    # --signal=USR2@120, and with --time=3 Slurm signals the tasks about a minute after the
    # start (sbatch(1): up to 60 s before that; 1 s before it, measured here), while the run
    # holds at its first iteration; nothing but the time limit signals it
    work = str(tmp_path / 'limited')
    start = time.monotonic()
    job = submit(slurm_cluster, preempt_configs['signalled_usr2'],
                 preempt_configs['pythonpath'], work, 'evt-limited', sbatch='--time=3',
                 early='USR2')
    assert job_field(slurm_cluster, job, 'TimeLimit') == '00:03:00'
    wait_training(slurm_cluster, job, work)
    training = time.monotonic()
    deadline = training + HANG_TIMEOUT
    while job_field(slurm_cluster, job, 'Restarts') != '1':
        assert job_field(slurm_cluster, job, 'JobState') not in ENDED
        assert time.monotonic() < deadline, read(osp.join(work, 'slurm.out'))[-6000:]
        time.sleep(0.5)
    requeued = time.monotonic()
    # the requeued start gets a limit it cannot reach: one signal in this test
    slurm_cluster.run('scontrol', 'update', f'JobId={job}', 'TimeLimit=30')
    wait_job(slurm_cluster, job)
    assert_requeued_and_resumed(slurm_cluster, job, work, uninterrupted, 'SIGUSR2')
    print(f'\nWALL time-limited + requeued {time.monotonic() - start:.1f} s (training after '
          f'{training - start:.1f} s, requeued after {requeued - start:.1f} s)')


@IN_CLUSTER
@pytest.mark.e2e
def test_an_iteration_based_batch_job_signalled_by_scancel_resumes_and_matches(
        slurm_cluster, shapes_root, tmp_path):
    # the demo segmentation config of tests/test_preemption.py (IterBasedTrainLoop, mmseg's
    # InfiniteSampler, a persistent worker): Slurm signals every process of the step, the
    # dataloader workers included, which an iteration-based loop starts before the hook runs
    pythonpath = f'{tmp_path}:{FIXTURES}'
    runs = {}
    for name, pause in (('plain', []), ('signalled', [dict(
            type='PauseUntilSignalled', iteration=2, timeout=HANG_TIMEOUT)])):
        work = str(tmp_path / name)
        cfg = write_preemption_config(tmp_path, 'seg', name, shapes_root, pause)
        job = submit(slurm_cluster, cfg, pythonpath, work, f'evt-seg-{name}')
        if pause:
            wait_training(slurm_cluster, job, work, 'PauseUntilSignalled: holding')
            slurm_cluster.run('scancel', '--signal=USR1', job)
        state = wait_job(slurm_cluster, job)
        runs[name] = (work, read(osp.join(work, 'slurm.out')), job)
        assert state == 'COMPLETED', runs[name][1][-6000:]
    work, log, job = runs['signalled']
    assert job_field(slurm_cluster, job, 'Restarts') == '1'
    assert ('SIGUSR1 received; saving preempted_iter_3.pth at iteration 3, then exiting with '
            '75') in log, log[-6000:]
    assert f'mmevt: job {job}: srun exited 75 (preempted, checkpoint saved): requeueing' in log
    assert 'resuming the run stopped by SIGUSR1 at iteration 3' in log
    assert 'killed by signal' not in log
    last = PREEMPTION_KINDS['seg'][2]
    assert_same_weights(load_weights(osp.join(runs['plain'][0], last)),
                          load_weights(osp.join(work, last)))
