"""The prepared GPU session's scripts stay runnable between GPU sessions: a device is lent
only to some sessions, with minutes of device time, so a script that breaks on the CPU side
would waste the draw."""
import json
import os.path as osp
import re
import subprocess
import sys
import tarfile

import pytest
import torch

from helpers import HANG_TIMEOUT, REPO, load_tool, tool_env


def test_gpu_checks_quick_on_the_cpu(capsys):
    tool = load_tool('tools/analysis/gpu_checks.py')
    results = list(tool.check_paths(__import__("torch").device("cpu"), quick=True))
    # every layout, every precision, each fast path that has a CPU backward (SDPA here)
    assert {r['mode'] for r in results} == set(tool.LAYOUTS)
    assert {r['precision'] for r in results} == set(tool.PRECISIONS)
    assert {r['impl'] for r in results} >= {'sdpa'}
    bad = [r for r in results if not r['ok']]
    assert not bad, bad
    # the compiled part: every layout with EVT's decay, and RMT's Manhattan decay once
    cases = tool.COMPILED_CASES
    assert {m for m, d in cases if d == 'euclidean'} == set(tool.LAYOUTS)
    assert ('full', 'manhattan') in cases and len(set(cases)) == len(cases)


SESSION = osp.join(REPO, 'tools', 'analysis', 'gpu_session.sh')


def _session_steps():
    text = open(SESSION).read()
    (steps, ) = re.findall(r'^STEPS=\(([^)]*)\)', text, flags=re.M)
    return text, {name: int(limit) for name, limit in
                  (item.split(':') for item in steps.split())}


def test_gpu_session_fits_its_budget():
    # the budget: one run in about 300 s, so that a rerun of what failed fits in
    # the 15 minutes of device time with two machine starts
    text, steps = _session_steps()
    assert len(steps) >= 8 and sum(steps.values()) <= 300, steps
    for name in steps:  # every step has its commands
        assert re.search(rf'^    {re.escape(name)}\)', text, flags=re.M), name
    for script in re.findall(r'(tools/analysis/\w+\.py)', text):
        assert osp.isfile(osp.join(REPO, script)), script


@pytest.mark.e2e
def test_gpu_session_rehearsal_returns_few_files_with_rows_as_measured(tmp_path):
    out = tmp_path / 'out'
    env = tool_env(REHEARSE='1', OUT=str(out), PYTHON=sys.executable)

    def session(*steps):
        return subprocess.run(['bash', SESSION, *steps], cwd=REPO, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=HANG_TIMEOUT)

    bad = session('throughput', 'no-such-step')
    assert bad.returncode == 2 and 'unknown step no-such-step; the steps: checks' in bad.stdout
    bad = session('with_cp=1.5')
    assert bad.returncode == 2 and ("with_cp=1.5: the limit must be whole seconds "
                                    "(NAME=SECONDS), got '1.5'") in bad.stdout
    assert not out.exists()  # refused before anything was written
    run = session('throughput', 'with_cp=30')
    assert run.returncode == 0, run.stdout[-4000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ['env.json', 'logs.tar.gz', 'report.md', 'rows.jsonl', 'steps.tsv']
    assert len(files) <= 8  # what the device returns at most
    env_json = json.loads((out / 'env.json').read_text())
    assert env_json['python'] and env_json['packages']['torch'] == torch.__version__
    rows = [json.loads(line) for line in (out / 'rows.jsonl').read_text().splitlines()]
    assert {(r['step'], r['arch'], r.get('attn_impl')) for r in rows} >= {
        ('throughput', 'evt-s', 'sdpa'), ('throughput', 'evt-s', 'flex'),
        ('throughput', 'rmt-s', 'auto'), ('throughput', 'swin-t', '-'),
        ('with_cp', 'evt-s', None), ('with_cp', 'rmt-s', None)}
    steps = (out / 'steps.tsv').read_text().splitlines()
    assert [line.split('\t')[:2] for line in steps[1:]] == [['throughput', '0'],
                                                            ['with_cp', '0']]
    assert steps[2].split('\t')[3] == str(30 * 20)  # NAME=SECONDS, scaled in a rehearsal
    with tarfile.open(out / 'logs.tar.gz') as tar:
        assert {'./throughput.log', './with_cp.log'} <= set(tar.getnames())
    report = (out / 'report.md').read_text()
    assert '| evt-s | flex |' in report and '### Targets' in report
    again = session('throughput')  # never mixes two runs' rows
    assert again.returncode == 2 and 'already holds results' in again.stdout


def _row(arch, impl, case, dtype, compiled, ips=None, seconds=None, peak=100., **extra):
    batch = 64 if case.startswith('b') else 2
    seconds = seconds or batch / ips
    return dict(step='x', arch=arch, attn_impl=impl, source='test', case=case, dtype=dtype,
                compiled=compiled, seconds=seconds, images_per_s=batch / seconds,
                peak_mem_mb=peak, **extra)


def test_gpu_report_says_each_target_met_or_not_and_checks_the_auto_rule():
    tool = load_tool('tools/analysis/gpu_report.py')
    auto_path, render = tool.auto_path, tool.render
    tp = 'b64@224'
    rows = []
    for dtype in ('fp32', 'bf16'):
        for compiled in (False, True):
            rows += [_row('evt-s', 'sdpa', tp, dtype, compiled, ips=1000),
                     _row('evt-s', 'flex', tp, dtype, compiled, ips=1200 if compiled else 500),
                     _row('rmt-s', 'auto', tp, dtype, compiled, ips=700),
                     _row('swin-t', '-', tp, dtype, compiled, ips=1100)]
        rows += [_row('evt-s', 'sdpa', 'train', dtype, False, seconds=0.1, peak=900),
                 _row('evt-s', 'flex', 'train', dtype, False, seconds=0.2, peak=800),
                 _row('rmt-s', 'auto', 'train', dtype, False, seconds=0.1, peak=1000)]
    # the checkpointing tool's rows are not the benchmark's training step
    rows += [dict(step='with_cp', arch='rmt-s', case='train', dtype=d, compiled=False,
                  with_cp=cp, seconds=0.2, peak_mem_mb=500) for d in ('fp32', 'bf16')
             for cp in (False, True)]
    rows += [dict(step='checks-paths', check='paths', mode='full', ok=True),
             dict(step='checks-paths', check='paths', mode='group', ok=False)]
    # a rerun measured Swin-T fp32 eager again: its later row wins
    rows.append(_row('swin-t', '-', tp, 'fp32', False, ips=950))
    report = render(dict(device='GPU', python='3.12', packages={'torch': '2.11'}), rows)
    lines = report.splitlines()

    def verdict(name):
        (line, ) = [x for x in lines if x.startswith(f'| {name} |')]
        return line.split('|')[-2].strip()

    # EVT-S is the path 'auto' picks: SDPA eager (1000/s), Flex compiled where Flex exists
    compiled_evt = 1200 if auto_path(True) == 'flex' else 1000
    assert verdict('EVT-S >= Swin-T images/s (fp32, eager)') == 'met'  # 1000 vs 950
    assert verdict('EVT-S >= Swin-T images/s (bf16, eager)') == '**not met**'  # vs 1100
    assert verdict('EVT-S >= Swin-T images/s (bf16, compiled)') == (
        'met' if compiled_evt >= 1100 else '**not met**')
    assert verdict('EVT-S >= 1.5x RMT-S images/s (fp32, eager)') == '**not met**'  # 1000 < 1050
    assert verdict('EVT-S >= 1.5x RMT-S images/s (fp32, compiled)') == (
        'met' if compiled_evt >= 1050 else '**not met**')
    assert verdict('EVT-S train peak MB <= RMT-S (fp32, eager)') == 'met'  # 900 vs 1000
    # the rule against the faster path: SDPA eager (agrees), Flex compiled
    eager_rule = [x for x in lines if x.startswith('| b64@224 | fp32 | eager |')]
    assert eager_rule and eager_rule[0].endswith('| sdpa | sdpa | yes |')
    compiled_rule = [x for x in lines if x.startswith('| b64@224 | fp32 | compiled |')]
    assert compiled_rule[0].endswith(f"| flex | {auto_path(True)} | "
                                     f"{'yes' if auto_path(True) == 'flex' else '**no**'} |")
    assert '- checks-paths: 1 passed, 1 failed' in report and 'FAIL' in report
    assert '| swin-t | - | test | 950 |' in report  # the rerun's row


def test_gpu_report_reads_a_row_file_cut_off_mid_line(tmp_path):
    from mmevt.analysis.records import read_rows
    path = tmp_path / 'rows.jsonl'
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": ')  # the step was killed while writing
    assert read_rows(str(path)) == [{'a': 1}, {'a': 2}]
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(ValueError, match='line 2 is not JSON'):
        read_rows(str(path))
