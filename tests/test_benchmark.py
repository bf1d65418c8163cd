"""The benchmark tool runs end to end on this machine's device and writes JSON."""
import json

import pytest

from helpers import run_tool

pytestmark = pytest.mark.e2e  # every test here runs the tools in a subprocess


def test_benchmark_throughput_train_and_scaling(tmp_path):
    out_json = tmp_path / 'bench.json'
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', 'rmt-test', 'swin-t',
                   '--batch', '1', '--size', '224', '--warmup', '1', '--iters', '1',
                   '--json', str(out_json))
    assert 'device: ' in out and '| evt-test | b1@224 | bf16 |' in out
    rows = json.loads(out_json.read_text())['rows']
    assert {r['arch'] for r in rows} == {'evt-test', 'rmt-test', 'swin-t'}
    assert all(r['images_per_s'] > 0 for r in rows)
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', '--train', '64', '96',
                   '--dtype', 'fp32', '--warmup', '0', '--iters', '1')
    row = next(line for line in out.splitlines() if line.startswith('| evt-test | train |'))
    assert float(row.split('|')[7]) > 0  # CPU peak memory growth of the training step
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', '--scaling', '64', '128',
                   '--dtype', 'fp32', '--warmup', '0', '--iters', '1')
    assert '| evt-test | 128x128 | fp32 |' in out


def test_benchmark_reads_config_backbones_and_counts_complexity(tmp_path):
    import os.path as osp

    from helpers import CONFIGS
    from mmevt.analysis import count_macs, count_params
    from mmevt.models import EVT
    cfg = osp.join(CONFIGS, 'cls', 'ablation', 'evt-s_2d-windows_8xb128_in1k.py')
    out_json = tmp_path / 'ablation.json'
    out = run_tool('tools/analysis/benchmark.py', '--config', cfg, '--complexity',
                   '--batch', '1', '--size', '96', '--dtype', 'fp32', '--warmup', '0',
                   '--iters', '1', '--json', str(out_json))
    assert '| evt-s_2d-windows_8xb128_in1k | b1@96 | fp32 |' in out
    assert '| evt-t |' not in out  # --config alone runs only the configs
    (row, ) = json.loads(out_json.read_text())['rows']
    cls_kwargs = dict(out_indices=(3, ), out_norm_cfg=None)  # the classifier's backbone
    windows = EVT('evt-s', mixers=['window_grid'] * 3 + ['full'], **cls_kwargs)
    groups = EVT('evt-s', **cls_kwargs)
    # the config's mixers were applied: same weights as EVT-S, different partition cost
    assert abs(row['params_m'] - count_params(groups) / 1e6) < 1e-9
    assert abs(row['gmacs'] - count_macs(windows, (1, 3, 96, 96)) / 1e9) < 1e-9
    assert count_macs(windows, (1, 3, 96, 96)) != count_macs(groups, (1, 3, 96, 96))


def test_benchmark_compiled_only():
    # aot_eager: the tool's compiled path (dynamo traces the whole backbone, AOT autograd)
    # without inductor's C++ code generation, which alone took ~40 s of the suite on 2 cores
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', '--compile', 'only',
                   '--compile-backend', 'aot_eager', '--batch', '1', '--size', '64',
                   '--dtype', 'fp32', '--warmup', '1', '--iters', '1')
    rows = [line for line in out.splitlines() if line.startswith('| evt-test |')]
    assert len(rows) == 1 and '| fp32 | True |' in rows[0]
