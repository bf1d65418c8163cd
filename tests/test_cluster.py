"""EVT on a cluster: the toolkits' Slurm and multi-node launches.

A real Slurm started by the tests (the ``slurm_cluster`` fixture, ``tests/slurm_cluster.py``:
munged, slurmctld and two slurmd on this host) runs ``tools/slurm_train.sh`` and
``tools/slurm_test.sh`` on 2 tasks as on a CPU cluster (``GPUS_PER_NODE=0``); two torchrun
agents on this host are the two nodes of ``tools/dist_train.sh`` (``NNODES=2``). The tests
that need the cluster form the pytest-xdist group ``slurm`` (one cluster per run).

Every distributed run here sets ``OMP_NUM_THREADS=1``: torchrun sets it to 1 only when it
starts more than one process per node, so a 2-node run of one process each would otherwise
compute with all cores' threads, in another summation order, than the 1-node 2-process run
it is compared with. Training data are the session's generated shapes (8 images: 2 per task
and iteration, 2 epochs = 4 iterations).
"""
import glob
import os
import os.path as osp
import pickle
import re
import subprocess
import sys
import time

import pytest
import torch

from helpers import COLLECTIVE_TIMEOUT, DEMO_DET, HANG_TIMEOUT, REPO, job_env, load_weights
from slurm_cluster import free_port

IN_CLUSTER = pytest.mark.xdist_group('slurm')  # one worker, so one cluster, for these

# Imported by every task through the config's custom_imports: each rank saves its parameters
# (the checkpoint holds rank 0's only) and prints where it ran and what mmengine set up.
RANK_REPORT = '''
import os

import torch
from mmengine.dist import get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class RankReport(Hook):
    def after_train(self, runner):
        model = getattr(runner.model, 'module', runner.model)
        torch.save({k: v.detach().clone() for k, v in model.named_parameters()},
                   os.path.join(runner.work_dir, f'rank{get_rank()}.pt'))
        keys = ('MASTER_ADDR', 'MASTER_PORT', 'SLURMD_NODENAME', 'GROUP_RANK', 'LOCAL_RANK')
        print(f'RANK_REPORT rank={get_rank()} world={get_world_size()} '
              + ' '.join(f'{k}={os.environ.get(k, "-")}' for k in keys), flush=True)
'''

CONFIG = '''
_base_ = {base!r}
custom_imports = dict(imports=['mmevt', 'rank_report'], allow_failed_imports=False)
custom_hooks = [dict(type='RankReport')]
env_cfg = dict(dist_cfg=dict(timeout={timeout}))  # a stalled collective fails in minutes
data_root = {root!r}
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root))
# one image a batch: a prediction does not depend on how the images are split among ranks
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_validation.json')
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=2, val_begin=3)  # no validation while training
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))
# every box kept: a 4-iteration model scores low, and the test compares all predictions
model = dict(test_cfg=dict(rcnn=dict(score_thr=0.0)))
'''


@pytest.fixture(scope='module')
def demo_job(shapes_root, tmp_path_factory):
    """The demo detection config on the session's shapes, with the rank report: (config
    path, the folder to put on the tasks' ``PYTHONPATH``)."""
    folder = tmp_path_factory.mktemp('cluster_job')
    (folder / 'rank_report.py').write_text(RANK_REPORT)
    cfg = folder / 'demo_cluster.py'
    cfg.write_text(CONFIG.format(base=DEMO_DET, root=shapes_root.rstrip('/') + '/',
                                 timeout=COLLECTIVE_TIMEOUT))
    return str(cfg), str(folder)


def cold_yapf_cache(folder: str) -> dict:
    """The environment of a launch whose ranks start with an empty yapf cache
    (``XDG_CACHE_HOME``): every rank's mmengine formats the config with yapf, and on an empty
    cache ranks that import it together can read each other's half-written grammar pickle
    (google/yapf#1204); the launchers write it once before the ranks start."""
    os.makedirs(folder)
    return dict(XDG_CACHE_HOME=folder)


def assert_yapf_cache_written(env: dict) -> None:
    grammars = glob.glob(osp.join(env['XDG_CACHE_HOME'], 'YAPF', '**', '*.pickle'),
                         recursive=True)
    assert grammars, os.listdir(env['XDG_CACHE_HOME'])
    for path in grammars:
        with open(path, 'rb') as f:
            assert pickle.load(f), path  # complete


def launch(args, env, check: bool = True):
    """Run ``bash args`` (a launcher script) from the repo root; its CompletedProcess, with
    the wall time in ``.wall``."""
    start = time.monotonic()
    proc = subprocess.run(['bash', *args], cwd=REPO, env=env, timeout=HANG_TIMEOUT, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    proc.wall = time.monotonic() - start
    if check:
        assert proc.returncode == 0, f'{args} exited {proc.returncode}:\n{proc.stdout[-6000:]}'
    return proc


def rank_reports(log: str) -> dict:
    """rank -> the RANK_REPORT fields that rank printed."""
    reports = {}
    for line in re.findall(r'RANK_REPORT (.*)', log):
        fields = dict(f.split('=', 1) for f in line.split())
        reports[int(fields['rank'])] = fields
    return reports


def rank_params(work: str) -> list:
    """Each rank's parameters after training (the rank report's files), rank 0 first."""
    return [torch.load(p) for p in sorted(glob.glob(osp.join(work, 'rank*.pt')))]


def assert_same_params(a: dict, b: dict, what: str) -> None:
    assert a.keys() == b.keys(), what
    for k in a:
        # DDP all-reduces the gradients, so ranks (and equal runs) step identically
        torch.testing.assert_close(b[k], a[k], rtol=0, atol=0, msg=f'{what}: {k}')


def coco_metrics(log: str) -> dict:
    """The metrics of the last ``Epoch(test)`` line of a log."""
    line = [ln for ln in log.splitlines() if 'Epoch(test)' in ln and 'coco/' in ln][-1]
    return dict(re.findall(r'(coco/\w+): (-?[\d.]+)', line))


# ---------------------------------------------------------------- without a cluster
# the variables mmengine's launchers write into os.environ themselves (not through
# monkeypatch): registered here, each test leaves them as it found them (a MASTER_ADDR left
# behind sends a later torchrun in this process's tests to that address)
LAUNCH_VARIABLES = ('MASTER_ADDR', 'MASTER_PORT', 'WORLD_SIZE', 'LOCAL_RANK', 'RANK')


@pytest.fixture(autouse=True)
def _launch_variables_restored(monkeypatch):
    for key in LAUNCH_VARIABLES:
        if key in os.environ:
            monkeypatch.setenv(key, os.environ[key])
        else:  # recorded as absent: removed again afterwards
            monkeypatch.setenv(key, '')
            monkeypatch.delenv(key)


def test_slurm_environment_is_mmengines(monkeypatch):
    # the CPU path restates mmengine's _init_dist_slurm up to init_process_group: the same
    # variables for every precedence of port / MASTER_PORT / MASTER_ADDR
    import mmengine.dist.utils as dist_utils

    import mmevt  # noqa: F401
    from mmevt.patches import cpu_distributed
    ours = dist_utils._init_dist_slurm
    mmengines = ours._mmevt_original
    assert mmengines.__module__ == 'mmengine.dist.utils'
    calls = []
    monkeypatch.setattr(torch.distributed, 'init_process_group', lambda **kw: calls.append(kw))
    monkeypatch.setattr(torch.cuda, 'set_device', lambda i: None)  # mmengine's, on a CPU
    # the node list's first host, which both take from scontrol (run for real on the cluster)
    monkeypatch.setattr(dist_utils.subprocess, 'getoutput', lambda cmd: {
        'scontrol show hostname node[3-4] | head -n1': 'node3'}[cmd])
    monkeypatch.setattr(cpu_distributed, 'first_host', {'node[3-4]': 'node3'}.__getitem__)
    keys = ('MASTER_PORT', 'MASTER_ADDR', 'WORLD_SIZE', 'LOCAL_RANK', 'RANK')
    for port, preset in [(None, {}), (29611, {}), (None, {'MASTER_PORT': '29612'}),
                         (29613, {'MASTER_PORT': '29612', 'MASTER_ADDR': '10.1.2.3'})]:
        seen = []
        for init in (mmengines, ours):
            for k in keys:
                monkeypatch.delenv(k, raising=False)
            for k, v in dict(preset, SLURM_PROCID='1', SLURM_NTASKS='2', SLURM_LOCALID='0',
                             SLURM_NODELIST='node[3-4]').items():
                monkeypatch.setenv(k, v)
            init('gloo', port=port)
            seen.append({k: os.environ[k] for k in keys})
        assert seen[0] == seen[1], (port, preset, seen)
    assert calls == [{'backend': 'gloo'}] * 8


def test_slurm_master_address_needs_a_working_scontrol(monkeypatch, tmp_path):
    # mmengine would make scontrol's error text the master address; ours says what to set
    import mmevt  # noqa: F401
    from mmevt.patches.cpu_distributed import first_host
    from slurm_cluster import program
    error = r'`scontrol show hostname n\[1-2\]` failed (?s:.*)Set SLURM_CONF .* or MASTER_ADDR'
    if program('scontrol'):  # a configuration it cannot use (an empty file fails at once)
        (tmp_path / 'empty.conf').write_text('')
        monkeypatch.setenv('SLURM_CONF', str(tmp_path / 'empty.conf'))
        with pytest.raises(RuntimeError, match=r'ClusterName needs to be specified(?s:.*)'
                           r'Set SLURM_CONF'):
            first_host('n[1-2]')
    monkeypatch.setenv('PATH', str(tmp_path))  # and no scontrol at all
    with pytest.raises(RuntimeError, match=error):
        first_host('n[1-2]')


def test_slurm_launcher_keeps_mmengines_path_on_accelerators(monkeypatch):
    # nccl, or a CUDA / NPU device: mmengine's own code runs (it calls
    # torch.cuda.set_device); ours only for gloo on a machine with none of them. The same
    # for the pytorch launcher.
    import mmengine.device
    import mmengine.dist.utils as dist_utils

    import mmevt  # noqa: F401
    devices, groups = [], []
    monkeypatch.setattr(torch.cuda, 'set_device', devices.append)
    monkeypatch.setattr(torch.distributed, 'init_process_group', lambda **kw: groups.append(kw))
    for k, v in dict(SLURM_PROCID='0', SLURM_NTASKS='1', SLURM_LOCALID='0', SLURM_NODELIST='n1',
                     MASTER_ADDR='127.0.0.1', RANK='0', LOCAL_RANK='0').items():
        monkeypatch.setenv(k, v)
    for launch_init in (dist_utils._init_dist_slurm, dist_utils._init_dist_pytorch):
        devices.clear()
        launch_init('nccl')
        assert devices == [0] and groups[-1] == {'backend': 'nccl'}
        monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
        launch_init('gloo')
        assert devices == [0, 0]
        monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
        monkeypatch.setattr(mmengine.device, 'is_npu_available', lambda: True)
        launch_init('gloo')  # mmengine's (0.10.7's slurm path itself has no NPU branch)
        assert devices == [0, 0, 0]
        monkeypatch.setattr(mmengine.device, 'is_npu_available', lambda: False)
        launch_init('gloo')  # CPU only: ours, no set_device
        assert devices == [0, 0, 0] and groups[-1] == {'backend': 'gloo'}


def test_slurm_scripts_say_their_usage():
    for script, words in (('slurm_train.sh', 'PARTITION JOB_NAME CONFIG WORK_DIR'),
                          ('slurm_test.sh', 'PARTITION JOB_NAME CONFIG CHECKPOINT')):
        proc = launch([f'tools/{script}', 'cpu', 'job'], dict(os.environ), check=False)
        assert proc.returncode == 2 and words in proc.stdout, proc.stdout


# ---------------------------------------------------------------- on the test cluster
@pytest.fixture(scope='module')
def slurm_trained(slurm_cluster, demo_job, tmp_path_factory):
    """``tools/slurm_train.sh`` on 2 tasks of one node (the host's), as a CPU cluster runs
    it: (work dir, log, the job's MASTER_PORT, wall seconds)."""
    cfg, pythonpath = demo_job
    work = str(tmp_path_factory.mktemp('slurm_train'))
    port = str(free_port())
    env = job_env(pythonpath, slurm_cluster, GPUS='2', GPUS_PER_NODE='0', MASTER_PORT=port,
                  SRUN_ARGS=f'--nodes=1 --nodelist={slurm_cluster.node_names[0]}',
                  **cold_yapf_cache(osp.join(work, 'cache')))
    proc = launch(['tools/slurm_train.sh', slurm_cluster.partition, 'evt-train', cfg, work],
                  env)
    assert_yapf_cache_written(env)
    return work, proc.stdout, port, proc.wall


@IN_CLUSTER
@pytest.mark.e2e
def test_slurm_train_sh_trains_on_two_tasks(slurm_cluster, slurm_trained):
    work, log, port, _ = slurm_trained
    host = slurm_cluster.node_names[0]
    # srun got the CPU cluster's resources and the gloo overrides, no --gres
    assert re.search(r'srun -p cpu --job-name=evt-train --ntasks=2 --cpus-per-task=1 '
                     r'--kill-on-bad-exit=1 --nodes=1 --nodelist=\S+ .*--launcher=slurm '
                     r'--cfg-options env_cfg.dist_cfg.backend=gloo '
                     r'model_wrapper_cfg.device_ids=None --work-dir=', log), log[:3000]
    assert 'Distributed launcher: slurm' in log and 'GPU number: 2' in log  # world size
    assert 'Epoch(train) [2][2/2]' in log
    reports = rank_reports(log)
    assert sorted(reports) == [0, 1], log[-3000:]
    for r in reports.values():
        # the slurm launcher took the master address by mmengine's rule (`scontrol show
        # hostname $SLURM_NODELIST | head -n1`, restated by the cpu-distributed patch): the
        # job's one node
        assert (r['world'], r['MASTER_ADDR'], r['MASTER_PORT'], r['SLURMD_NODENAME']) == (
            '2', host, port, host), r
    assert sorted(osp.basename(p) for p in glob.glob(osp.join(work, '*.pth'))) == [
        'epoch_2.pth']
    rank0, rank1 = rank_params(work)
    assert_same_params(rank0, rank1, 'rank 1 vs rank 0')
    state = load_weights(osp.join(work, 'epoch_2.pth'))
    assert_same_params(rank0, {k: state[k] for k in rank0}, 'checkpoint vs rank 0')


@IN_CLUSTER
@pytest.mark.e2e
def test_slurm_test_sh_matches_a_one_process_test(slurm_cluster, slurm_trained, demo_job,
                                                  tmp_path):
    from mmengine.fileio import load

    from mmevt.apis import toolkit_tool_path
    cfg, pythonpath = demo_job
    ckpt = osp.join(slurm_trained[0], 'epoch_2.pth')
    # 2 tasks through mmdet's own tools/test.py (TEST_PY), predictions dumped by rank 0
    env = job_env(pythonpath, slurm_cluster, toolkit_tool=True, GPUS='2', GPUS_PER_NODE='0',
                  MASTER_PORT=str(free_port()), TEST_PY=toolkit_tool_path('mmdet', 'test'))
    two = launch(['tools/slurm_test.sh', slurm_cluster.partition, 'evt-test', cfg, ckpt,
                  '--work-dir', str(tmp_path / 'two'), '--out', str(tmp_path / 'two.pkl')],
                 env).stdout
    assert 'Distributed launcher: slurm' in two and 'GPU number: 2' in two
    one = subprocess.run([sys.executable, 'tools/test.py', cfg, ckpt, '--work-dir',
                          str(tmp_path / 'one'), '--out', str(tmp_path / 'one.pkl')],
                         cwd=REPO, env=job_env(pythonpath), text=True, timeout=HANG_TIMEOUT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert one.returncode == 0, one.stdout[-6000:]
    assert 'Distributed training: False' in one.stdout
    metrics = coco_metrics(two)
    assert len(metrics) == 12 and metrics == coco_metrics(one.stdout), (two[-2000:],
                                                                        one.stdout[-2000:])
    # the metric could agree by chance: every prediction of every image agrees
    a, b = load(str(tmp_path / 'one.pkl')), load(str(tmp_path / 'two.pkl'))
    ids = [p['img_id'] for p in a]
    assert ids == [p['img_id'] for p in b] and len(set(ids)) == 4, (ids, b)  # each image once
    for pa, pb in zip(a, b):
        ia, ib = pa['pred_instances'], pb['pred_instances']
        assert len(ia['scores']) == 20  # max_per_img: score_thr=0 keeps every box
        for key in ('bboxes', 'scores', 'labels'):
            torch.testing.assert_close(ib[key], ia[key], rtol=0, atol=0,
                                       msg=f'image {pa["img_id"]}: {key}')
        assert ia['masks'] == ib['masks'], pa['img_id']


@IN_CLUSTER
@pytest.mark.e2e
def test_two_slurm_nodes_train_as_one(slurm_cluster, slurm_trained, demo_job, tmp_path):
    # Debian's slurmd is built with --enable-multiple-slurmd: two slurmd on this host are
    # two nodes, and `srun -N 2` spreads the tasks over them (here one each, through
    # mmdet's own tools/train.py: TRAIN_PY)
    from mmevt.apis import toolkit_tool_path
    assert 'MULTIPLE_SLURMD         = Yes' in slurm_cluster.run('scontrol', 'show', 'config')
    cfg, pythonpath = demo_job
    work = str(tmp_path / 'work')
    env = job_env(pythonpath, slurm_cluster, toolkit_tool=True, GPUS='2', GPUS_PER_NODE='0',
                  MASTER_PORT=str(free_port()), SRUN_ARGS='--nodes=2 --ntasks-per-node=1',
                  TRAIN_PY=toolkit_tool_path('mmdet', 'train'))
    log = launch(['tools/slurm_train.sh', slurm_cluster.partition, 'evt-2nodes', cfg, work],
                 env).stdout
    reports = rank_reports(log)
    assert sorted(reports) == [0, 1], log[-3000:]
    nodes = [reports[r]['SLURMD_NODENAME'] for r in (0, 1)]
    assert sorted(nodes) == sorted(slurm_cluster.node_names), reports
    # Slurm lists a job's nodes sorted; the first is the master, as on a real cluster
    assert {r['MASTER_ADDR'] for r in reports.values()} == {min(nodes)}
    assert all(r['LOCAL_RANK'] == '0' and r['world'] == '2' for r in reports.values())
    rank0, rank1 = rank_params(work)
    assert_same_params(rank0, rank1, '2 nodes: rank 1 vs rank 0')
    assert_same_params(rank_params(slurm_trained[0])[0], rank0, '2 nodes vs 1 node')


def _family_config(family: str, shapes_root: str, folder) -> tuple:
    """(config, checkpoint name, a line of its 2-task log) for the seg / cls family: the
    shrunk configs of test_seg.py / test_cls.py (BN, not SyncBN: below)."""
    if family == 'seg':
        from seg_tiny import tiny_seg_config
        base = osp.join(REPO, 'configs', 'seg', 'sem_fpn', 'fpn_evt-t_8xb2-80k_ade20k-512x512.py')
        text = tiny_seg_config(base, shapes_root.rstrip('/'), str(folder / 'work'), 'sem_fpn')
        return text, 'iter_2.pth', 'Iter(val) [2/2]'  # 4 images, 2 a task
    from cls_tiny import tiny_cls_config

    from mmevt.datasets import generate_shape_classes
    generate_shape_classes(str(folder / 'data'), num_train=2, num_val=1, img_size=(64, 64))
    text = tiny_cls_config(str(folder / 'data'), str(folder / 'work')) + (
        "train_dataloader['batch_size'] = 2\n")  # 12 images: 3 iterations of 2 tasks x 2
    return text, 'epoch_1.pth', 'Epoch(train) [1][3/3]'


@IN_CLUSTER
@pytest.mark.e2e
@pytest.mark.parametrize('family', ['seg', 'cls'])
def test_slurm_train_sh_runs_each_family(slurm_cluster, shapes_root, family, tmp_path):
    # det above; tools/train.py picks the toolkit by the config's default_scope. SyncBN runs
    # on GPUs only (torch's SyncBatchNorm refuses CPU tensors): mmpretrain converts every BN
    # of our cls configs (sync_bn='torch'), which a CPU cluster switches off (docs/cluster.md)
    text, ckpt, line = _family_config(family, shapes_root, tmp_path)
    cfg = tmp_path / f'{family}.py'
    cfg.write_text(text)
    extra = ['--cfg-options', 'sync_bn=None'] if family == 'cls' else []
    env = job_env(str(tmp_path), slurm_cluster, GPUS='2', GPUS_PER_NODE='0',
                  MASTER_PORT=str(free_port()), SRUN_ARGS='--nodes=1')
    log = launch(['tools/slurm_train.sh', slurm_cluster.partition, f'evt-{family}', str(cfg),
                  str(tmp_path / 'work'), *extra], env).stdout
    assert 'Distributed launcher: slurm' in log and 'GPU number: 2' in log
    assert line in log, log[-3000:]
    assert osp.isfile(tmp_path / 'work' / ckpt)


# mmengine's pytorch launcher on one CPU process, as code that is not EVT's calls it; an atexit
# handler registered before the group (so it runs after mmevt's) says whether it still stands
GROUP_AT_EXIT = '''
import atexit
import torch.distributed as dist
atexit.register(lambda: print(f'AT EXIT initialized={{dist.is_initialized()}}', flush=True))
import mmevt  # noqa: F401
from mmengine.dist import init_dist
init_dist('pytorch', backend='gloo')
print(f'STARTED world={{dist.get_world_size()}}', flush=True)
if {destroy}:
    dist.destroy_process_group()  # a program that ends its group itself
'''


@pytest.mark.e2e
@pytest.mark.parametrize('destroy', [False, True])
def test_gloo_group_is_destroyed_at_exit(tmp_path, destroy):
    # mmengine never destroys its group; a gloo rank left to interpreter finalization can
    # abort after its work (pytorch/pytorch#190489): the patch destroys it at exit, and
    # leaves a program that destroyed it alone
    script = tmp_path / 'group.py'
    script.write_text(GROUP_AT_EXIT.format(destroy=destroy))
    env = job_env(str(tmp_path), MASTER_ADDR='127.0.0.1', MASTER_PORT=str(free_port()),
                  RANK='0', LOCAL_RANK='0', WORLD_SIZE='1')
    proc = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, text=True,
                          timeout=HANG_TIMEOUT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert 'STARTED world=1' in proc.stdout
    assert proc.stdout.rstrip().endswith('AT EXIT initialized=False'), proc.stdout[-4000:]


PLAIN_SLURM_JOB = '''
import os, sys
sys.path.insert(0, {tests!r})
import mmevt  # noqa: F401  (its patches, as in any process that imports it)
from helpers import plain_mmengine_runner
runner = plain_mmengine_runner(
    os.path.join({work!r}, 'plain'), launcher='slurm',
    env_cfg=dict(dist_cfg=dict(backend='gloo', timeout={timeout})),
    cfg=dict(model_wrapper_cfg=dict(type='MMDistributedDataParallel', device_ids=None)))
runner.train()
import torch.distributed as dist
print(f'PLAIN rank={{dist.get_rank()}} world={{dist.get_world_size()}} trained', flush=True)
# ended as mmengine's tools end, the group left standing: the patch destroys it at exit
'''


@IN_CLUSTER
@pytest.mark.e2e
def test_plain_mmengine_code_runs_the_slurm_launcher_on_cpus(slurm_cluster, tmp_path):
    # code that is not EVT's: mmengine's Runner with launcher='slurm' and gloo, under srun
    script = tmp_path / 'plain_job.py'
    script.write_text(PLAIN_SLURM_JOB.format(tests=osp.dirname(__file__), work=str(tmp_path),
                                            timeout=COLLECTIVE_TIMEOUT))
    srun = ['srun', '-p', slurm_cluster.partition, '--nodes=1', '--ntasks=2',
            '--kill-on-bad-exit=1', sys.executable, str(script)]

    def run(**extra):
        return subprocess.run(srun, cwd=REPO, text=True, timeout=HANG_TIMEOUT,
                              env=job_env(str(tmp_path), slurm_cluster,
                                          MASTER_PORT=str(free_port()), **extra),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    on = run()
    assert on.returncode == 0, on.stdout[-4000:]
    assert sorted(re.findall(r'PLAIN rank=(\d) world=2 trained', on.stdout)) == ['0', '1']
    off = run(MMEVT_PATCHES='-cpu-distributed')  # mmengine's own launcher
    assert off.returncode != 0 and 'torch.cuda.set_device(local_rank)' in off.stdout, \
        off.stdout[-4000:]


@IN_CLUSTER
@pytest.mark.e2e
def test_gpu_mode_asks_for_gpus_a_cpu_node_has_not(slurm_cluster, demo_job, tmp_path):
    # GPUS_PER_NODE > 0 is the toolkits' srun (--gres=gpu:N, N tasks a node): refused by
    # a cluster whose nodes have no GPUs, which is why the CPU mode leaves --gres out
    cfg, pythonpath = demo_job
    env = job_env(pythonpath, slurm_cluster, GPUS='2', GPUS_PER_NODE='2', CPUS_PER_TASK='1')
    proc = launch(['tools/slurm_train.sh', slurm_cluster.partition, 'evt-gpu', cfg,
                   str(tmp_path)], env, check=False)
    assert proc.returncode != 0
    assert '--gres=gpu:2 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1' in proc.stdout
    assert 'Invalid generic resource (gres) specification' in proc.stdout, proc.stdout


# ---------------------------------------------------------------- two torchrun nodes
@pytest.mark.e2e
def test_two_torchrun_nodes_match_one_node(demo_job, tmp_path):
    # NNODES=2: two torchrun agents on this host, one process each, meeting at
    # MASTER_ADDR:PORT (the launch arguments, not a network); the same training as one
    # node with two processes
    cfg, pythonpath = demo_job
    gloo = ['--cfg-options', 'env_cfg.dist_cfg.backend=gloo', 'model_wrapper_cfg.device_ids=None']
    port = str(free_port())
    nodes = [subprocess.Popen(
        ['bash', 'tools/dist_train.sh', cfg, '1', '--work-dir', str(tmp_path / 'two'), *gloo],
        cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=job_env(pythonpath, NNODES='2', NODE_RANK=str(rank), MASTER_ADDR='127.0.0.1',
                    PORT=port)) for rank in (0, 1)]
    logs = [node.communicate(timeout=HANG_TIMEOUT)[0] for node in nodes]
    assert [n.returncode for n in nodes] == [0, 0], '\n'.join(log[-3000:] for log in logs)
    reports = {**rank_reports(logs[0]), **rank_reports(logs[1])}
    assert [(reports[r]['GROUP_RANK'], reports[r]['LOCAL_RANK'], reports[r]['world'])
            for r in (0, 1)] == [('0', '0', '2'), ('1', '0', '2')], reports
    assert 'GPU number: 2' in logs[0]
    env = job_env(pythonpath, PORT=str(free_port()),
                  **cold_yapf_cache(str(tmp_path / 'cache')))
    one = launch(['tools/dist_train.sh', cfg, '2', '--work-dir', str(tmp_path / 'one'), *gloo],
                 env)
    assert_yapf_cache_written(env)
    assert 'GPU number: 2' in one.stdout
    two, single = rank_params(str(tmp_path / 'two')), rank_params(str(tmp_path / 'one'))
    assert_same_params(two[0], two[1], '2 nodes: rank 1 vs rank 0')
    assert_same_params(single[0], two[0], '2 nodes vs 1 node')
