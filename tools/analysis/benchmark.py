#!/usr/bin/env python
"""Side-by-side speed and memory of EVT, our RMT and Swin, on whatever device is present.

    python tools/analysis/benchmark.py                       # throughput at 224, batch 64
    python tools/analysis/benchmark.py --latency             # batch-1 latency (the CPU case)
    python tools/analysis/benchmark.py --train 800 1344      # backbone train step, batch 2
    python tools/analysis/benchmark.py --latency --train 512 512 --train-batch 1 --compile
        # batch-1 latency and a batch-1 train step, eager and compiled, in one run
    python tools/analysis/benchmark.py --train 224 224 --train 800 1344 --saved --with-cp both
        # training steps at two sizes with their saved-for-backward MiB, with_cp off / on
    python tools/analysis/benchmark.py --scaling 224 512 1024  # time/memory vs input size
    python tools/analysis/benchmark.py --config configs/cls/ablation/*.py --complexity
        # the backbones of configs (token-mixer ablations), with params and FLOPs
    python tools/analysis/benchmark.py --arch evt-s rmt-s --profile 10  # dominant kernels
    python tools/analysis/benchmark.py --arch evt-s --attn-impl sdpa flex --compile both
        # EVT's attention paths side by side, eager and compiled (the evidence for 'auto')
    python tools/analysis/benchmark.py --ratio evt-t swin-t evt-t evt-t:recompute=False \
        --train 224 224 --rounds 5  # EVT-T's step over Swin-T's and over EVT-T keeping all
        # its activations ('ARCH:KEY=VALUE': layer_cfgs), read round by round (interleaved)
    python tools/analysis/benchmark.py --commits HEAD~1 HEAD --arch evt-t --latency --rounds 5
        # one model at two commits, each round one process per commit, alternating

Needs only torch (+ mmengine for mmevt itself); Swin comes from mmpretrain when installed,
else from timm (built for each case's input size), else it is left out with a note; each
row says where its model came from. ``--config`` reads ``model.backbone`` of
OpenMMLab configs (their toolkit must be installed to resolve ``toolkit::`` bases). fp32
runs with TF32 off (as the EVT paper's A100 table); ``--dtype bf16`` runs under autocast.
Times are medians over ``--iters`` calls (and over ``--rounds`` interleaved rounds). Each
run first measures the device's fp32 matmul rate (``--matmul-peak``), the yardstick of its
rows. Compiled rows add the first call's time (the compile) and the graphs Dynamo made.
Prints a table and writes JSON (``--jsonl``: each row appended as soon as it is measured,
for runs that may be cut off). Every row carries the date, the commit, the device (CPU
model, threads) and torch; at the end the run writes the ratios it can read within itself:
the goals of ``tools/analysis/benchmark_goals.py`` whose two models it measured, and
``--ratio``'s. No time is compared across runs. The measuring itself is
:mod:`mmevt.analysis.benchmark`, the tables :mod:`mmevt.analysis.benchmark_tables`.
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence

import torch

from mmevt.analysis.benchmark import (DEFAULT_ARCHS, SWIN_SIZES, Job,  # noqa
                                      build_backbone, build_from_config, build_variants,
                                      complexity, input_cases, matmul_peak, measure,
                                      run_fields, run_jobs, saved_per_image, summarise)
from mmevt.analysis.benchmark_tables import format_row, ratio_table, row_name, table_header
from mmevt.analysis.records import append_row, device_name, read_rows

# the goals: project code beside this file, not the package's (appended, as the other tools
# find records_to_docs.py, so that it shadows no installed module)
sys.path.append(osp.dirname(osp.abspath(__file__)))
from benchmark_goals import goal_rows, pair_rows, ratio_row, time_ratio  # noqa: E402

build = build_backbone  # the names this script had (other tools load it as a module)

_BOTH = {'no': [False], 'both': [False, True], 'only': [True]}


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--arch', nargs='+', default=None,
                        help=f'archs to run (default: {" ".join(DEFAULT_ARCHS)}, or none '
                             'when --config is given)')
    parser.add_argument('--config', nargs='+', default=[],
                        help="also run the backbones of these configs ('model.backbone')")
    parser.add_argument('--complexity', action='store_true',
                        help='add params and multiply-adds per image (meta device, exact)')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--dtype', nargs='+', default=['fp32', 'bf16'], choices=['fp32', 'bf16'])
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--latency', action='store_true', help='batch 1 instead of --batch')
    parser.add_argument('--train', type=int, nargs=2, metavar=('H', 'W'), action='append',
                        help='train step (forward + backward) of the backbone, batch 2 '
                             '(repeat for several sizes)')
    parser.add_argument('--train-batch', type=int, default=2, metavar='B',
                        help='batch of the --train steps (default: 2)')
    parser.add_argument('--saved', action='store_true',
                        help='add the saved-for-backward MiB of the training steps at batch 1 '
                             'and per image at batch 2 (a saved-tensors hook; the same on '
                             'every device)')
    parser.add_argument('--saved-only', action='store_true',
                        help='with --saved: count the saved bytes only, time nothing (the '
                        'count is the same on every device: big sizes on a CPU)')
    parser.add_argument('--with-cp', nargs='?', const='both', default='no',
                        choices=list(_BOTH), help='also (both) or only (only) with gradient '
                        'checkpointing per block')
    parser.add_argument('--scaling', type=int, nargs='+', metavar='SIZE',
                        help='inference at these square sizes, batch 1')
    parser.add_argument('--compile', nargs='?', const='both', default='no',
                        choices=list(_BOTH),
                        help='also (both) or only (only) under torch.compile')
    parser.add_argument('--compile-backend', default='inductor',
                        help="torch.compile's backend (default: inductor; 'aot_eager' traces "
                             'and runs without code generation, to check a setup quickly)')
    parser.add_argument('--dynamic', choices=['auto', 'true', 'false'], default='auto',
                        help="torch.compile's dynamic (auto: None, torch's default)")
    parser.add_argument('--matmul-peak', type=int, default=None, metavar='N',
                        help='side of the matmul timed as the fp32 peak (default: 2048 on '
                             'CPU, 8192 on CUDA; 0: skip)')
    parser.add_argument('--attn-impl', nargs='+', default=['auto'],
                        help="EVT's attention paths, each a row of its own (default: auto)")
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--iters', type=int, default=10)
    parser.add_argument('--rounds', type=int, default=1,
                        help='interleaved rounds over all models; the median is reported')
    parser.add_argument('--profile', type=int, default=0, metavar='TOP',
                        help='print the TOP costliest ops of one step of each case')
    parser.add_argument('--json', help='write the results here')
    parser.add_argument('--jsonl', help='append each row to this JSON-lines file as soon as '
                        'it is measured')
    parser.add_argument('--tag', default='', help="a label put in each --jsonl row ('step')")
    parser.add_argument('--ratio', nargs='+', metavar='A B',
                        help="pairs of models: measure them side by side (instead of --arch) "
                        "and print each A's time over its B's in each case, the median of "
                        "the rounds' ratios")
    parser.add_argument('--commits', nargs=2, metavar=('REV_A', 'REV_B'),
                        help='measure --arch (one model) at two git commits: each round runs '
                        "this tool once per commit (the commit's own checkout), alternating; "
                        "prints REV_A's time over REV_B's")
    parser.add_argument('--goals-of', metavar='JSONL',
                        help='measure nothing: append to JSONL the goal ratios of its last '
                        "run's rows (a run cut off before it wrote them) and of the saved-"
                        'bytes counts with the same --tag')
    return parser.parse_args(argv)


def _passed_on(argv: Sequence[str]) -> List[str]:
    """The arguments a ``--commits`` round passes on: all but the run's own outputs."""
    own = {'--commits': 2, '--rounds': 1, '--json': 1, '--jsonl': 1, '--tag': 1,
           '--matmul-peak': 1}
    out, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a.split('=')[0] in own:
            skip = 0 if '=' in a else own[a]
        else:
            out.append(a)
    return out


def compare_commits(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """``--commits``: each commit exported (``git archive``), then per round one process
    of that commit's own tool per commit, alternating; the ratio of the two per case."""
    if not args.arch or len(args.arch) != 1:
        raise SystemExit('--commits measures one model: give it as --arch NAME')
    repo = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
    runs: Dict[str, List[List[dict]]] = {rev: [] for rev in args.commits}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for i, rev in enumerate(args.commits):
            trees[rev] = osp.join(tmp, str(i))
            subprocess.run(f'mkdir -p {trees[rev]} && git -C {repo} archive {rev} | '
                           f'tar -x -C {trees[rev]}', shell=True, check=True)
        for rnd in range(args.rounds):
            for rev, tree in trees.items():
                out = osp.join(tmp, f'{rnd}-{len(runs[rev])}.json')
                subprocess.run([sys.executable, osp.join(tree, 'tools/analysis/benchmark.py'),
                                *_passed_on(argv), '--rounds', '1', '--matmul-peak', '0',
                                '--json', out], cwd=tree, check=True,
                               env=dict(os.environ, PYTHONPATH=tree))
                with open(out) as f:
                    runs[rev].append(json.load(f)['rows'])
    (a, b), where = args.commits, run_fields(torch.device(args.device), repo)
    rows = []
    for i, row in enumerate(runs[a][0]):
        series = [[r[i]['seconds'] for r in runs[rev]] for rev in (a, b)]
        ratio, rounds = time_ratio(dict(round_seconds=series[0]), dict(round_seconds=series[1]))
        rows.append(ratio_row(f"{row['arch']} at {a} / at {b}, time", row['case'],
                              row['dtype'], ratio, rounds, **where))
    print('\n'.join(ratio_table(rows)))
    for r in rows:
        append_row(args.jsonl, r, step=args.tag)


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.commits:
        return compare_commits(args, argv)
    if args.goals_of:
        rows = read_rows(args.goals_of)
        # timed rows of the last run only; saved-bytes counts (exact, the same on every
        # run of a commit) of every run with the last row's tag
        end = rows[-1]
        last = [r for r in rows if 'arch' in r and r.get('step') == end.get('step') and (
            'seconds' not in r or (r.get('date'), r.get('commit')) == (end.get('date'),
                                                                        end.get('commit')))]
        where = {k: last[-1][k] for k in ('device', 'torch', 'date', 'commit', 'cpu',
                                          'threads') if k in last[-1]}
        ratios = goal_rows(last)
        print('\n'.join(ratio_table(ratios)))
        for r in ratios:
            append_row(args.goals_of, dict(r, **where), step=last[-1].get('step', ''))
        return
    if args.ratio:
        if len(args.ratio) % 2:
            raise SystemExit(f'--ratio takes pairs of models, got {args.ratio}')
        args.arch = list(dict.fromkeys(args.ratio))
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cases = input_cases(args.train, args.scaling, args.batch, args.size, args.latency,
                        args.train_batch)
    print(f'device: {device_name(device)}; torch {torch.__version__}')
    peak = None
    if args.matmul_peak != 0:
        peak = matmul_peak(device, 'fp32', args.matmul_peak)
        print(f"fp32 matmul peak (measured, {peak['n']} x {peak['n']}, TF32 off): "
              f"{peak['gflops_per_s']:.1f} GFLOP/s")
    compiled = _BOTH[args.compile]
    saved = bool((args.saved or args.saved_only) and args.train)
    columns = dict(with_complexity=args.complexity, compiled=True in compiled, saved=saved)
    print('\n'.join(table_header(**columns)))

    def skipped(arch: str) -> None:
        print(f'| {arch} | - | - | - | (no mmpretrain or timm: skipped) | | |')
    archs = args.arch if args.arch is not None else ([] if args.config else DEFAULT_ARCHS)
    variants = build_variants(archs, args.attn_impl, args.config, _BOTH[args.with_cp], skipped)
    jobs = [Job(v.name, v.model_for(shape), case, shape, train, dtype, comp, v.attn_impl,
                v.source, v.with_cp)
            for v in variants for case, shape, train in cases
            for dtype in args.dtype for comp in compiled]
    where = run_fields(device)  # every row's date, commit, machine and matmul peak
    if peak is not None:
        where.update(matmul_gflops_per_s=peak['gflops_per_s'], matmul_n=peak['n'])
    rows: List[dict] = []
    if args.saved_only:  # one row per model, case and dtype, each written when counted
        for v in variants:
            for case, shape, train in cases:
                for dtype in args.dtype:
                    row = dict(arch=v.name, case=case, shape=list(shape), dtype=dtype,
                               compiled=False, attn_impl=v.attn_impl,
                               **({'with_cp': True} if v.with_cp else {}),
                               **saved_per_image(v.model_for(shape), device, shape, dtype),
                               **where)
                    rows.append(row)
                    print(f"| {row_name(row)} | {case} | {dtype} | batch 1: "
                          f"{row['saved_mib_batch1']:.1f} MiB | batch 2: "
                          f"{row['saved_mib_per_image']:.1f} MiB / image |", flush=True)
                    append_row(args.jsonl, row, step=args.tag)
        jobs = []
    extras = {}  # complexity and saved bytes: per model, case and dtype, not per round
    for v in variants if jobs else []:
        for case, shape, train in cases:
            cost = complexity(v.model_for(shape), shape) if args.complexity else {}
            for dtype in args.dtype:
                mem = (saved_per_image(v.model_for(shape), device, shape, dtype)
                       if saved and train else {})
                extras[(v.name, v.attn_impl, v.with_cp, case, dtype)] = {**cost, **mem}

    def done(job: Job, runs: List[Dict[str, float]]) -> None:
        extra = dict(extras[(job.name, job.attn_impl, job.with_cp, job.case, job.dtype)])
        rows.append(summarise(job, runs, {**extra, **where}))
        print(format_row(rows[-1], **columns), flush=True)
        append_row(args.jsonl, rows[-1], step=args.tag)

    dynamic = {'auto': None, 'true': True, 'false': False}[args.dynamic]
    run_jobs(jobs, device, done, args.rounds, args.warmup, args.iters, args.profile,
             args.compile_backend, dynamic)
    pairs = list(zip(args.ratio[::2], args.ratio[1::2])) if args.ratio else []
    ratios = goal_rows(rows)
    goals = {(r['what'], r['case'], r['dtype']) for r in ratios}  # written once, with the goal
    ratios += [r for a, b in pairs for r in pair_rows(rows, a, b)
               if (r['what'], r['case'], r['dtype']) not in goals]
    if ratios:  # read within this run only
        print('\n'.join(ratio_table(ratios)))
        for r in ratios:
            append_row(args.jsonl, dict(r, **where), step=args.tag)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(device=device_name(device), torch=torch.__version__,
                           matmul_peak=peak, rows=rows), f, indent=1)


if __name__ == '__main__':
    main()
