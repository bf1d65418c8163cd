"""The benchmark tool runs end to end on this machine's device and writes JSON."""
import json

from conftest import run_tool


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
    assert '| evt-test | train | fp32 |' in out
    out = run_tool('tools/analysis/benchmark.py', '--arch', 'evt-test', '--scaling', '64', '128',
                   '--dtype', 'fp32', '--warmup', '0', '--iters', '1')
    assert '| evt-test | 128x128 | fp32 |' in out
