"""The benchmark tool runs end to end on this machine's device and writes JSON; its
measuring functions (:mod:`mmevt.analysis.benchmark`, :mod:`mmevt.analysis.memory`) count
what they say they count."""
import gc
import json

import pytest
import torch
from torch import nn

from helpers import load_tool, run_tool
from mmevt.analysis.benchmark import GraphCounter, matmul_peak, run_fields
from mmevt.analysis.benchmark_tables import (compile_section, format_row, memory_section,
                                             row_name, table_header, table_section)
from mmevt.analysis.memory import saved_bytes_split, saved_tensor_bytes


@pytest.mark.e2e  # the tool in a subprocess
def test_benchmark_throughput_train_and_scaling(tmp_path):
    out_json = tmp_path / 'bench.json'
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', 'rmt-test', 'swin-t',
                   '--batch', '1', '--size', '224', '--warmup', '1', '--iters', '1',
                   '--complexity', '--json', str(out_json))
    assert 'device: ' in out and '| evt-test | b1@224 | bf16 |' in out
    rows = json.loads(out_json.read_text())['rows']
    assert {r['arch'] for r in rows} == {'evt-test', 'rmt-test', 'swin-t'}
    # counted for mmpretrain's Swin too (its train() returns None, not the module)
    assert all(r['images_per_s'] > 0 and r['gmacs'] > 0 for r in rows)
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', '--train', '64', '96',
                   '--dtype', 'fp32', '--warmup', '0', '--iters', '1')
    row = next(line for line in out.splitlines() if line.startswith('| evt-test | train |'))
    assert float(row.split('|')[7]) > 0  # CPU peak memory growth of the training step
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', '--scaling', '64', '128',
                   '--dtype', 'fp32', '--warmup', '0', '--iters', '1')
    assert '| evt-test | 128x128 | fp32 |' in out


@pytest.mark.e2e  # the tool in a subprocess
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


@pytest.mark.e2e  # the tool in a subprocess
def test_benchmark_compiled_only():
    # aot_eager: the tool's compiled path (dynamo traces the whole backbone, AOT autograd)
    # without inductor's C++ code generation, which alone took ~40 s of the suite on 2 cores
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', '--compile', 'only',
                   '--compile-backend', 'aot_eager', '--batch', '1', '--size', '64',
                   '--dtype', 'fp32', '--warmup', '1', '--iters', '1', '--matmul-peak', '256')
    rows = [line for line in out.splitlines() if line.startswith('| evt-test |')]
    assert len(rows) == 1 and '| fp32 | True |' in rows[0]
    # the compile-time and graph columns: the backbone traced as one graph
    assert rows[0].split('|')[9].strip() == '1'
    assert 'fp32 matmul peak (measured, 256 x 256' in out


@pytest.mark.e2e  # the tool in a subprocess
def test_benchmark_saved_bytes_per_size_and_with_cp(tmp_path):
    out_json = tmp_path / 'saved.json'
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', '--train', '64', '96',
                   '--train', '96', '96', '--saved', '--with-cp', 'both', '--dtype', 'fp32',
                   '--warmup', '0', '--iters', '1', '--matmul-peak', '256', '--json',
                   str(out_json))
    assert '| evt-test (with_cp) | train@96x96 | fp32 | False |' in out
    rows = {(r['case'], r.get('with_cp', False)): r
            for r in json.loads(out_json.read_text())['rows']}
    assert set(rows) == {(c, cp) for c in ('train@64x96', 'train@96x96') for cp in (0, 1)}
    saved = {k: r['saved_mib_per_image'] for k, r in rows.items()}
    assert saved[('train@96x96', False)] > saved[('train@64x96', False)]
    for case in ('train@64x96', 'train@96x96'):  # checkpointing keeps the blocks' inputs
        assert saved[(case, True)] < 0.6 * saved[(case, False)]
    assert all(r['matmul_gflops_per_s'] > 0 for r in rows.values())


def test_saved_bytes_count_each_storage_once_and_leave_parameters_out():
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    got = saved_tensor_bytes(mlp, torch.randn(3, 8))
    # the input (first linear), the ReLU output (saved by the ReLU and the second linear:
    # one storage); the weights the linears save are parameters
    assert got.total == 4 * (3 * 8 + 3 * 16) and got.per_image == got.total / 3
    assert got.tensors == 4 and got.storages == 2
    assert got.largest[0] == ((3, 16), 'float32', 4 * 3 * 16)

    class Shared(nn.Module):
        def forward(self, x):
            y = x.exp()  # exp saves y; sin saves y; mul saves y and sin(y)
            return y * y.sin()
    got = saved_tensor_bytes(Shared(), torch.randn(2, 5, requires_grad=True))
    assert (got.tensors, got.storages, got.total) == (4, 2, 2 * 2 * 5 * 4)
    with pytest.raises(ValueError, match='dtype'):
        saved_tensor_bytes(mlp, torch.randn(3, 8), 'fp16')


def test_saved_bytes_count_frees_the_pass():
    # sigmoid saves its own output: packed as itself, it would keep its node (and the
    # whole graph) alive in a cycle the collector cannot see, a pass's worth per count
    import weakref
    seen = []
    model = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid())
    model[1].register_forward_hook(lambda m, i, out: seen.append(weakref.ref(out)))
    saved_tensor_bytes(model, torch.randn(3, 8))
    gc.collect()
    assert seen and seen[0]() is None


def test_saved_bytes_of_evt_grow_with_the_input_and_shrink_with_checkpointing():
    from mmevt.models import EVT
    x = torch.randn(2, 3, 64, 64)
    plain = saved_tensor_bytes(EVT('evt-test'), x)
    ckpt = saved_tensor_bytes(EVT('evt-test', with_cp=True), x)
    bigger = saved_tensor_bytes(EVT('evt-test'), torch.randn(2, 3, 128, 128))
    assert ckpt.total < 0.6 * plain.total
    assert 3 * plain.total < bigger.total  # 4x the pixels
    # autocast saves the matmul inputs in bf16
    split, bf16 = (saved_bytes_split(EVT('evt-test'), (64, 64), dtype)
                   for dtype in ('fp32', 'bf16'))
    assert split['batch2'] == plain.total == 2 * split['per_image']
    assert split['marginal'] == split['batch2'] - split['batch1']
    assert split['marginal'] < split['per_image']  # the decay bias tables: one per batch
    assert bf16['per_image'] < 0.9 * split['per_image']


def test_matmul_peak_and_graph_counter():
    peak = matmul_peak(torch.device('cpu'), 'fp32', n=128, iters=2)
    assert peak['n'] == 128 and peak['gflops_per_s'] > 0
    assert abs(peak['gflops_per_s'] - 2 * 128**3 / peak['seconds'] / 1e9) < 1e-6
    with pytest.raises(ValueError, match='dtype'):
        matmul_peak(torch.device('cpu'), 'fp16')

    def two_graphs(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()
    torch._dynamo.reset()
    counter = GraphCounter('eager')
    x = torch.randn(4)
    assert torch.equal(torch.compile(two_graphs, backend=counter)(x), x.sin().cos())
    assert counter.graphs == 2


def test_table_lines_have_the_headers_columns():
    row = dict(arch='evt-t', attn_impl='flex', with_cp=True, case='train', dtype='fp32',
               compiled=True, seconds=0.5, images_per_s=4.0, compile_s=12.0, graphs=1,
               saved_mib_per_image=163.5)
    assert row_name(row) == 'evt-t (flex, with_cp)'
    for cols in (dict(), dict(compiled=True), dict(with_complexity=True, saved=True),
                 dict(with_complexity=True, compiled=True, saved=True)):
        head = table_header(**cols)
        line = format_row(row, **cols)
        assert head[0].count('|') == head[1].count('|') == line.count('|'), cols
    assert format_row(row, compiled=True, saved=True).endswith('| 12.0 | 1 | - | 163.5 |')


def test_compile_section_pairs_eager_and_compiled_rows():
    goals = load_tool('tools/analysis/benchmark_goals.py')
    base = dict(arch='evt-t', attn_impl='auto', case='b1@224', shape=[1, 3, 224, 224],
                dtype='fp32', source='mmevt')
    # every row of a run carries its machine and the matmul rate that run measured
    base.update(device='CPU (x86_64, 2 threads)', torch='2.x', matmul_gflops_per_s=50.0,
                matmul_n=2048)
    rows = [dict(base, compiled=False, seconds=0.1, images_per_s=10.),
            dict(base, compiled=True, seconds=0.09, images_per_s=11., compile_s=30., graphs=1),
            dict(base, compiled=True, seconds=0.05, images_per_s=20., compile_s=31., graphs=1)]
    lines = compile_section(rows)
    assert lines[0] == ('- CPU (x86_64, 2 threads), torch 2.x: fp32 matmul 50.0 GFLOP/s '
                        '(2048 x 2048, TF32 off), measured in the same run')
    # the later compiled row of a case replaces the earlier; eager / compiled = speed-up
    assert '| evt-t | b1@224 | fp32 | 100.0 | 50.0 | 2.00 | 31 | 1 | - / - | - / - |' in lines
    # with a MAC count: the rates eager and compiled EVT reached, as shares of the run's
    # matmul peak;
    # with compiled Swin-T too: the speed goals, read round by round (interleaved rounds)
    swin = dict(base, arch='swin-t', compiled=True, seconds=0.1, images_per_s=10.,
                compile_s=20., graphs=1, round_seconds=[0.1, 0.2, 0.1])
    counted = [dict(r, gmacs=1.0) for r in rows[:3]] + [swin]
    counted[2]['round_seconds'] = [0.05, 0.06, 0.09]  # ratios .5, .3, .9: median .5
    ratios = goals.goal_rows(counted)
    lines = compile_section(counted + ratios)
    assert ('| evt-t | b1@224 | fp32 | 100.0 | 50.0 | 2.00 | 31 | 1 | 20.0 / 40.0 | '
            '40% / 80% |') in lines
    assert '| evt-t compiled / swin-t compiled, time | b1, 224 x 224, batch 1 | 0.50 | 0.8 ' \
           '| yes |' in lines
    assert '| evt-t compiled / evt-t, time | b1, 224 x 224, batch 1 | 0.50 | 0.9 | yes |' \
           in lines
    # the memory goals: EVT over Swin of its size, without with_cp, batch 1 and 2
    peers = [dict(base, case='train', shape=[2, 3, 224, 224], compiled=False, arch=arch,
                  saved_mib_batch1=b1, saved_mib_per_image=b2)
             for arch, b1, b2 in (('evt-t', 80., 90.), ('swin-t', 100., 100.))]
    lines = compile_section(rows + peers + goals.goal_rows(peers))
    assert '| evt-t / swin-t, saved bytes | 224 x 224, batch 1 | 0.80 | 0.8 | yes |' in lines
    assert ('| evt-t / swin-t, saved bytes | 224 x 224, per image, batch 2 | 0.90 | 0.8 '
            '| **no** |') in lines
    # the memory section: one line per pair and size, both batches, the goal
    lines = memory_section(peers + goals.goal_rows(peers))
    assert ('| evt-t / swin-t | 224 x 224 | 80 / 100 | 0.80 | 90 / 100 | 0.90 | 0.8 | **no** |'
            in lines)
    # any other records file: the tool's own table, a later row of a case replacing an
    # earlier, the columns the rows have
    lines = table_section(rows)
    assert lines[0].startswith('- CPU (x86_64, 2 threads), torch 2.x: fp32 matmul 50.0')
    assert lines[2].endswith('| peak MB | compile s | graphs |')
    assert '| evt-t | b1@224 | fp32 | True | 50.0 | 20.0 | - | 31.0 | 1 |' in lines
    assert not any('| 90.0 |' in line for line in lines) and len(lines) == 6


def test_every_record_says_when_where_and_what_was_measured():
    fields = run_fields(torch.device('cpu'))
    assert {'date', 'commit', 'cpu', 'threads', 'device', 'torch'} <= set(fields)
    assert fields['threads'] == torch.get_num_threads() and fields['cpu']
    assert fields['commit'] != 'unknown'  # the tests run in a git checkout
    line = table_section([dict(arch='evt-t', attn_impl='auto', case='b1@224', dtype='fp32',
                               shape=[1, 3, 224, 224], compiled=False, seconds=0.1,
                               images_per_s=10., **fields)])[0]
    assert fields['date'] in line and fields['commit'] in line
