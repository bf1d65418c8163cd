#!/usr/bin/env python
"""What ``EVT(with_cp=True)`` (gradient checkpointing per block) saves and costs.

    python tools/analysis/checkpointing.py                      # evt-t, 512 x 512, batch 2
    python tools/analysis/checkpointing.py --arch evt-t evt-s --train 800 1344 --rounds 3

One training step (forward + backward) of the backbone with and without checkpointing, on
the present device, timed and measured by ``tools/analysis/benchmark.py``'s ``measure``
(CUDA: peak allocated memory; CPU: growth of the resident set during the step, Linux only).
The two variants alternate over ``--rounds`` so a shared machine's drift hits both; medians
are reported, with the device name (``--jsonl``: also appended as records, what the docs'
table is written from).
"""
import argparse
import os.path as osp
import statistics
import sys

import torch

from mmevt.analysis.benchmark import measure
from mmevt.analysis.records import append_row, device_name, machine

# records_to_docs.py beside this file writes the docs' tables: project code, not the package's
sys.path.append(osp.dirname(osp.abspath(__file__)))
from records_to_docs import checkpointing_table  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--arch', nargs='+', default=['evt-t'])
    parser.add_argument('--train', type=int, nargs=2, default=[512, 512], metavar=('H', 'W'),
                        help='input size of the training step (default: 512 512)')
    parser.add_argument('--batch', type=int, default=2)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--iters', type=int, default=3)
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--jsonl', help='append each row to this JSON-lines file')
    parser.add_argument('--tag', default='', help="a label put in each --jsonl row ('step')")
    args = parser.parse_args(argv)
    if args.batch < 1 or min(args.train) < 32:
        parser.error(f'--batch must be >= 1 and --train H W >= 32, got {args.batch}, '
                     f'{args.train}')

    from mmevt.models import EVT
    device = torch.device(args.device)
    shape = (args.batch, 3, *args.train)
    print(f'device: {device_name(device)}; torch {torch.__version__}; training step '
          f'of the backbone, batch {args.batch}, {args.train[0]} x {args.train[1]} (H x W)')
    rows = []
    for arch in args.arch:
        models = {cp: EVT(arch, with_cp=cp) for cp in (False, True)}
        runs = {cp: [] for cp in models}
        for _ in range(args.rounds):
            for cp, model in models.items():
                runs[cp].append(measure(model, device, shape, 'fp32', True, False,
                                        args.warmup, args.iters))
        med = {cp: (statistics.median(r['seconds'] for r in rs),
                    statistics.median(r.get('peak_mem_mb', float('nan')) for r in rs))
               for cp, rs in runs.items()}
        for cp, (sec, mem) in med.items():
            rows.append(dict(arch=arch, case='train', shape=list(shape), dtype='fp32',
                             compiled=False, with_cp=cp, seconds=sec, peak_mem_mb=mem,
                             **machine(device)))
            append_row(args.jsonl, rows[-1], step=args.tag)
    print('\n'.join(checkpointing_table(rows)))


if __name__ == '__main__':
    main()
