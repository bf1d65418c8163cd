#!/usr/bin/env python
"""The GPU session's results as markdown: versions, checks, tables, the auto rule, targets.

    python tools/analysis/gpu_report.py gpu_results/env.json gpu_results/rows.jsonl \
        [rerun/rows.jsonl ...] [-o report.md]

Rows of later files replace those of earlier ones for the same case (a rerun of a step): the
GPU session's rows as the tables of ``docs/benchmark.md``, with the project's targets. It
is project code, not the package's (users never run it).

The rows are those ``tools/analysis/gpu_session.sh`` appends (benchmark, checkpointing and
correctness rows, see :mod:`mmevt.analysis.records`); where a rerun measured a case again,
its later row wins. "EVT-S" in the targets is EVT-S with the path ``attn_impl='auto'`` picks
in that setting (what a user gets), and the rule is checked against the faster path.
"""
import argparse
import functools
import json
import sys
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from mmevt.analysis.records import read_rows

# the session's cases (a rehearsal's smaller throughput case is read off its rows)
THROUGHPUT_CASE = 'b64@224'
TRAIN_CASE = 'train'
EVT, RMT, SWIN = 'evt-s', 'rmt-s', 'swin-t'
SETTINGS = [(dtype, compiled) for dtype in ('fp32', 'bf16') for compiled in (False, True)]


def _key(row: Dict) -> Tuple:
    return tuple(row.get(k) for k in ('step', 'check', 'arch', 'attn_impl', 'case', 'dtype',
                                      'compiled', 'with_cp', 'mode', 'decay', 'impl',
                                      'precision'))


def latest(rows: Iterable[Dict]) -> List[Dict]:
    """The rows with each measured case once: a later row of a case replaces the earlier."""
    by_key = {}
    for row in rows:
        by_key.pop(_key(row), None)
        by_key[_key(row)] = row
    return list(by_key.values())


def find(rows: Sequence[Dict], with_cp: Optional[bool] = None, **match) -> Optional[Dict]:
    """The last timed row with these fields (None: not measured); ``with_cp``: a row of
    the checkpointing tool (None: a benchmark row)."""
    hits = [r for r in rows if 'seconds' in r and r.get('with_cp') == with_cp
            and all(r.get(k) == v for k, v in match.items())]
    return hits[-1] if hits else None


@functools.lru_cache()
def auto_path(compiled: bool) -> str:
    """The path ``attn_impl='auto'`` picks for EVT-S on CUDA, eager or compiled, asked of
    the model's own attention modules (built on the meta device: no weights); paths that
    differ between stages are joined by ``'/'``."""
    from mmevt.models import EVT as Backbone
    from mmevt.models.layers import SpatialDecayAttention
    with torch.device('meta'):
        model = Backbone(EVT)
    return '/'.join(dict.fromkeys(
        m.resolved_impl(torch.device('cuda'), compiling=compiled) for m in model.modules()
        if isinstance(m, SpatialDecayAttention)))


def evt_row(rows, case: str, dtype: str, compiled: bool) -> Optional[Dict]:
    """EVT-S as a user gets it: the row of the path ``'auto'`` picks (or an ``'auto'`` row)."""
    return (find(rows, arch=EVT, case=case, dtype=dtype, compiled=compiled,
                 attn_impl=auto_path(compiled))
            or find(rows, arch=EVT, case=case, dtype=dtype, compiled=compiled,
                    attn_impl='auto'))


def _table(header: Sequence[str], body: List[Sequence[str]]) -> List[str]:
    return ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header),
            *('| ' + ' | '.join(map(str, r)) + ' |' for r in body)]


def _models(rows, case: str) -> List[Tuple[str, str, str]]:
    seen = []
    for r in rows:
        if r.get('case') == case and 'images_per_s' in r:
            label = (r['arch'], r.get('attn_impl', '-'), r.get('source', '-'))
            if label not in seen:
                seen.append(label)
    return seen


def _pivot(rows, case: str, cell: Callable[[Optional[Dict]], str]) -> List[str]:
    """One line per model (arch, path, source), one column per (dtype, compiled)."""
    header = ['model', 'path', 'from'] + [f"{d} {'compiled' if c else 'eager'}"
                                          for d, c in SETTINGS]
    body = [[arch, impl, source] + [cell(find(rows, arch=arch, attn_impl=impl, case=case,
                                                   dtype=d, compiled=c)) for d, c in SETTINGS]
            for arch, impl, source in _models(rows, case)]
    return _table(header, body)


def _num(x: float) -> str:
    return f'{x:.0f}' if x >= 100 else f'{x:.3g}'


def _ips(row): return _num(row['images_per_s']) if row else '-'


def _step(row):
    return f"{1e3 * row['seconds']:.0f} ms, {row['peak_mem_mb']:.0f} MB" if row else '-'


def _shape(rows, case: str) -> str:
    """``'H x W, batch B'`` of a case, read off its rows."""
    shape = next((r['shape'] for r in rows if r.get('case') == case and 'shape' in r), None)
    return f'{shape[2]} x {shape[3]}, batch {shape[0]}' if shape else case


def check_lines(rows) -> List[str]:
    """Passed / failed per correctness step, and each failure."""
    checks = [r for r in rows if 'ok' in r]
    lines = []
    for step in dict.fromkeys(r.get('step', '') for r in checks):
        part = [r for r in checks if r.get('step', '') == step]
        bad = [r for r in part if not r['ok']]
        lines.append(f'- {step}: {len(part) - len(bad)} passed, {len(bad)} failed')
        lines += [f'  - FAIL {r}' for r in bad]
    return lines or ['- no correctness rows']


def rule_lines(rows, throughput_case: str = THROUGHPUT_CASE) -> List[str]:
    """Per setting where both were measured: the faster of SDPA and Flex, and 'auto'."""
    body = []
    for case in (throughput_case, TRAIN_CASE):
        for dtype, compiled in SETTINGS:
            got = {impl: find(rows, arch=EVT, case=case, dtype=dtype, compiled=compiled,
                              attn_impl=impl) for impl in ('sdpa', 'flex')}
            if None in got.values():
                continue
            faster = min(got, key=lambda impl: got[impl]['seconds'])
            auto = auto_path(compiled)
            body.append([case, dtype, 'compiled' if compiled else 'eager',
                         *(f"{1e3 * got[i]['seconds']:.1f}" for i in ('sdpa', 'flex')),
                         faster, auto, 'yes' if auto == faster else '**no**'])
    return _table(['case', 'dtype', 'mode', 'sdpa ms', 'flex ms', 'faster', 'auto picks',
                   'agrees'], body) if body else ['(sdpa and flex not both measured)']


def target_lines(rows, throughput_case: str = THROUGHPUT_CASE) -> List[str]:
    """The project's GPU targets, each met or not (or not measured)."""
    body = []

    def add(name, ours, other, ratio, value, higher_is_better=True):
        if ours is None or other is None:
            body.append([name, '-', '-', 'not measured'])
            return
        a, b = value(ours), value(other)
        met = a >= ratio * b if higher_is_better else a <= ratio * b
        body.append([name, _num(a), _num(b), 'met' if met else '**not met**'])

    for dtype, compiled in SETTINGS:
        mode = 'compiled' if compiled else 'eager'
        evt = evt_row(rows, throughput_case, dtype, compiled)
        add(f'EVT-S >= Swin-T images/s ({dtype}, {mode})', evt,
            find(rows, arch=SWIN, case=throughput_case, dtype=dtype, compiled=compiled), 1,
            lambda r: r['images_per_s'])
        add(f'EVT-S >= 1.5x RMT-S images/s ({dtype}, {mode})', evt,
            find(rows, arch=RMT, case=throughput_case, dtype=dtype, compiled=compiled), 1.5,
            lambda r: r['images_per_s'])
    for dtype in ('fp32', 'bf16'):
        add(f'EVT-S train peak MB <= RMT-S ({dtype}, eager)',
            evt_row(rows, TRAIN_CASE, dtype, False),
            find(rows, arch=RMT, case=TRAIN_CASE, dtype=dtype, compiled=False), 1,
            lambda r: r['peak_mem_mb'], higher_is_better=False)
    return _table(['target', 'EVT-S', 'other', 'verdict'], body)


def render(env: Dict, rows: Iterable[Dict]) -> str:
    """The report (markdown): versions, checks, tables, the auto rule, the targets."""
    rows = latest(rows)
    pk = env.get('packages', {})
    tp = next((r['case'] for r in rows if str(r.get('case', '')).startswith('b')),
              THROUGHPUT_CASE)
    lines = [f"Device: {env.get('device')}; Python {env.get('python')}, torch "
             f"{pk.get('torch')}, triton {pk.get('triton')}, timm {pk.get('timm')}, CUDA "
             f"{env.get('cuda')}; driver {env.get('driver', '-')}.", '',
             *(['A rehearsal on the CPU: these are not GPU numbers, and "auto picks" is the '
                "rule's choice on CUDA.", ''] if str(env.get('device')).startswith('CPU')
               else []),
             '### Correctness on the device', '', *check_lines(rows), '',
             f'### Throughput, {tp} (images/s; fp32 with TF32 off, bf16 autocast)', '',
             *_pivot(rows, tp, _ips), '',
             f'### Backbone training step, {_shape(rows, TRAIN_CASE)} (time, peak '
             'memory)', '',
             *_pivot(rows, TRAIN_CASE, _step), '']
    cp = [r for r in rows if 'with_cp' in r]
    if cp:
        lines += ['### with_cp (fp32 training step)', '',
                  *_table(['arch', 'with_cp', 'ms / step', 'peak MB'],
                          [[r['arch'], r['with_cp'], f"{1e3 * r['seconds']:.0f}",
                            f"{r['peak_mem_mb']:.0f}"] for r in cp]), '']
    sizes = [r for r in rows if 'x' in str(r.get('case', '')) and 'images_per_s' in r]
    if sizes:
        lines += ['### Scaling (batch 1)', '',
                  *_table(['model', 'size', 'dtype', 'ms', 'peak MB'],
                          [[r['arch'], r['case'], r['dtype'], f"{1e3 * r['seconds']:.1f}",
                            f"{r.get('peak_mem_mb', 0):.0f}"] for r in sizes]), '']
    lines += ["### attn_impl='auto' against the measurements (EVT-S)", '',
              *rule_lines(rows, tp), '', '### Targets', '', *target_lines(rows, tp), '']
    return '\n'.join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('env', help="the session's env.json")
    parser.add_argument('rows', nargs='+', help='rows.jsonl files, oldest first')
    parser.add_argument('-o', '--out', help='write the report here (default: print it)')
    args = parser.parse_args(argv)
    with open(args.env) as f:
        env = json.load(f)
    text = render(env, [row for path in args.rows for row in read_rows(path)])
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == '__main__':
    main()
