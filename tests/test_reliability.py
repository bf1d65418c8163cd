"""Reliability: odd inputs, numerics under autocast, debug checks, atomic checkpoints."""
import os

import pytest
import torch

from mmevt.models import EVT


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
    model = EVT(arch, group_size=61)
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


def test_debug_mode_rejects_nan_inputs(monkeypatch):
    model = EVT('evt-test').eval()
    x = torch.randn(1, 3, 64, 64)
    x[0, 1, 5, 7] = float('nan')
    with torch.no_grad():
        model(x)  # off by default: no host sync on the hot path
        monkeypatch.setenv('MMEVT_DEBUG', '1')
        with pytest.raises(ValueError, match=r'NaN/Inf values, first at index \[0, 1, 5, 7\]'):
            model(x)


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
