"""Reliability: odd inputs, numerics under autocast, debug checks, atomic checkpoints."""
import os

import pytest
import torch

from helpers import COLLECTIVE_TIMEOUT, HANG_TIMEOUT, REPO, load_weights, run_tool
from slurm_cluster import free_port
from mmevt.models import EVT
from mmevt.ops import input_checks_enabled, set_input_checks


@pytest.mark.parametrize('shape', [(1, 3, 32, 2048), (3, 3, 37, 41), (1, 3, 97, 31 + 2),
                                   (2, 3, 2048, 32)])
def test_any_batch_and_extreme_aspect_ratios(shape):
    model = EVT('evt-test').eval()
    with torch.no_grad():
        outs = model(torch.randn(shape))
    assert all(o.shape[0] == shape[0] and torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
@pytest.mark.parametrize('arch', ['evt-test', 'rmt-test'])
def test_autocast_forward_backward_stay_finite(dtype, arch):
    torch.manual_seed(0)
    # group size 61 on a 33x47 stage-1 grid: the last group is mostly padding
    model = EVT(arch, group_sizes=61)
    x = torch.randn(2, 3, 129, 187) * 3
    with torch.autocast('cpu', dtype=dtype):
        outs = model(x)
        loss = sum(o.float().square().mean() for o in outs)
    assert all(torch.isfinite(o).all() for o in outs)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_decay_never_makes_a_row_all_minus_inf():
    from mmevt.ops import decay_bias, decay_log_rates, grouped_distance
    for hw, s, mode in [((1, 1), 64, 'group'), ((5, 7), 64, 'dilate'), ((9, 9), 80, 'group'),
                        ((200, 336), 64, 'dilate')]:
        bias = decay_bias(decay_log_rates(4, 2, 6), grouped_distance(hw, s, mode, 'euclidean'))
        assert torch.isfinite(bias).any(-1).all()


def test_input_checks_switch_rejects_nan_inputs(monkeypatch):
    model = EVT('evt-test').eval()
    x = torch.randn(1, 3, 64, 64)
    x[0, 1, 5, 7] = float('nan')
    previous = set_input_checks(False)
    try:
        with torch.no_grad():
            model(x)  # off: no host sync on the hot path
            monkeypatch.setenv('MMEVT_DEBUG', '1')  # read at import only, not per forward
            model(x)
            assert set_input_checks(True) is False and input_checks_enabled()
            with pytest.raises(ValueError, match=r'NaN/Inf values, first at index '
                                                 r'\[0, 1, 5, 7\]'):
                model(x)
            set_input_checks(False)
            model(x)
    finally:
        set_input_checks(previous)


def test_mmevt_debug_is_read_at_import(monkeypatch):
    import importlib

    import mmevt.ops.checks as checks
    assert [checks.debug_from_env({'MMEVT_DEBUG': v}) for v in ('1', 'yes', '0', '')] == [
        True, True, False, False]
    assert checks.debug_from_env({}) is False
    previous = input_checks_enabled()
    try:
        for value, expected in (('1', True), ('0', False)):
            monkeypatch.setenv('MMEVT_DEBUG', value)
            importlib.reload(checks)  # what importing mmevt in a new process does
            assert input_checks_enabled() is expected  # the backbone's view of the switch
    finally:
        set_input_checks(previous)


def test_checkpoint_writes_are_atomic(tmp_path, monkeypatch):
    import mmevt  # noqa: F401
    from mmengine.runner.checkpoint import save_checkpoint
    path = tmp_path / 'epoch_1.pth'
    save_checkpoint({'state_dict': {'w': torch.ones(3)}}, str(path))
    good = path.read_bytes()

    def killed(src, dst):  # the process dies between writing and renaming
        raise KeyboardInterrupt

    monkeypatch.setattr(os, 'replace', killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({'state_dict': {'w': torch.zeros(1000)}}, str(path))
    assert path.read_bytes() == good  # the old checkpoint is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ['epoch_1.pth']  # no temp left


def test_atomic_writes_keep_the_usual_permissions(tmp_path):
    # mkstemp's temporary file is private (0o600); the checkpoint must be readable like
    # any file the user's umask allows, e.g. by a colleague evaluating it
    import stat

    from mmevt.patches.atomic_writes import atomic_write
    plain = tmp_path / 'plain.txt'
    plain.write_text('x')
    atomic_write('x', tmp_path / 'atomic.txt')
    mode = stat.S_IMODE((tmp_path / 'atomic.txt').stat().st_mode)
    assert mode == stat.S_IMODE(plain.stat().st_mode), oct(mode)
    old = os.umask(0o027)
    try:
        atomic_write('x', tmp_path / 'strict.txt')
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / 'strict.txt').stat().st_mode) == 0o640


# ------------------------------------------------------------------ runs on the CPU
def _deterministic_cls_config(tmp_path, cls_root, work, extra=''):
    from cls_tiny import tiny_cls_config
    # no random augmentation, no drop path, no batch-statistics layers: a run is a pure
    # function of the data order, so resumed and multi-process runs can match exactly
    text = tiny_cls_config(cls_root, str(work)) + '''
model['backbone'].update(drop_path_rate=0., norm_cfg=dict(type='GN', num_groups=1))
model['neck'] = dict(_delete_=True, type='GlobalAveragePooling')
model['head']['in_channels'] = 128
model['train_cfg'] = None
train_dataloader['batch_size'] = 4
train_dataloader['dataset']['pipeline'] = test_pipeline
# the ImageNet recipe's RepeatAugSampler gives each process its own share of repeated
# samples, so a 2-process epoch is not the 1-process one: compare with plain sampling
train_dataloader['sampler'] = dict(type='DefaultSampler', shuffle=True)
randomness = dict(seed=0, deterministic=True)
env_cfg = dict(dist_cfg=dict(backend='gloo', timeout=''' + str(COLLECTIVE_TIMEOUT) + '''))
model_wrapper_cfg = dict(type='MMDistributedDataParallel', device_ids=None)
''' + extra
    path = tmp_path / f'{work.name}.py'
    path.write_text(text)
    return str(path)


@pytest.fixture(scope='module')
def cls_root(tmp_path_factory):
    from mmevt.datasets import generate_shape_classes
    root = str(tmp_path_factory.mktemp('cls'))
    generate_shape_classes(root, num_train=2, num_val=1, img_size=(64, 64))  # 12 images
    return root


@pytest.mark.e2e
def test_resumed_run_reaches_the_same_weights(tmp_path, cls_root):
    full = _deterministic_cls_config(tmp_path, cls_root, tmp_path / 'full')
    run_tool('tools/train.py', full, '--cfg-options', 'train_cfg.max_epochs=2')
    part = _deterministic_cls_config(tmp_path, cls_root, tmp_path / 'part')
    run_tool('tools/train.py', part)  # stops after epoch 1, as if killed after its checkpoint
    out = run_tool('tools/train.py', part, '--resume', '--cfg-options', 'train_cfg.max_epochs=2')
    assert 'resumed epoch: 1' in out
    a = load_weights(tmp_path / 'full' / 'epoch_2.pth')
    b = load_weights(tmp_path / 'part' / 'epoch_2.pth')
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=1e-6, rtol=1e-5, msg=k)


@pytest.mark.e2e
def test_two_process_training_matches_one_process(tmp_path, cls_root):
    import subprocess
    import sys

    # SGD, not the recipe's AdamW: Adam scales each update by 1 / |gradient|, so a gradient
    # that is zero up to rounding (summed in another order by two processes) moves its
    # weight by about lr either way; SGD keeps rounding at rounding size, and also sees a
    # sum of the processes' gradients where their mean belongs (Adam is blind to the scale)
    sgd = ("optim_wrapper = dict(optimizer=dict(_delete_=True, type='SGD', lr=0.1, "
           "momentum=0.9, weight_decay=1e-4))\n")
    single = _deterministic_cls_config(tmp_path, cls_root, tmp_path / 'single', extra=sgd)
    run_tool('tools/train.py', single)
    dist = _deterministic_cls_config(tmp_path, cls_root, tmp_path / 'dist',
                                     extra=sgd + "train_dataloader['batch_size'] = 2\n")
    env = dict(os.environ, PYTHON=sys.executable, PORT=str(free_port()), OMP_NUM_THREADS='1')
    proc = subprocess.run(['bash', 'tools/dist_train.sh', dist, '2'], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=HANG_TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert 'world_size: 2' in proc.stdout or 'Distributed launcher: pytorch' in proc.stdout
    a = load_weights(tmp_path / 'single' / 'epoch_1.pth')
    b = load_weights(tmp_path / 'dist' / 'epoch_1.pth')
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=1e-5, rtol=1e-4, msg=k)
    # and the distributed test launcher evaluates that checkpoint
    proc = subprocess.run(['bash', 'tools/dist_test.sh', dist, str(tmp_path / 'dist' /
                                                                   'epoch_1.pth'), '2',
                           '--work-dir', str(tmp_path / 'dist_test')], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=HANG_TIMEOUT)
    assert proc.returncode == 0 and 'accuracy/top1:' in proc.stdout, proc.stdout[-4000:]


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_autocast_on_a_large_input_stays_finite(dtype):
    torch.manual_seed(0)
    model = EVT('evt-test')
    x = torch.randn(1, 3, 512, 640) * 3  # 20k stage-1 tokens in groups, 320 in full stage 4
    with torch.autocast('cpu', dtype=dtype):
        outs = model(x)
        loss = sum(o.float().square().mean() for o in outs)
    loss.backward()
    assert all(torch.isfinite(o).all() for o in outs)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
