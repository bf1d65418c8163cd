#!/usr/bin/env python
"""What mmevt's ``atomic-local-writes`` patch costs mmengine's local writes.

    python tools/analysis/write_cost.py                  # 300 json dumps, 20 checkpoints
    python tools/analysis/write_cost.py --dumps 1000 --checkpoints 50 --rounds 5

Times ``mmengine.dump`` of a small json (as loggers and result dumps write) and
``mmengine.runner.checkpoint.save_checkpoint`` of a ~4 MB checkpoint, in fresh processes
with the patch on (``import mmevt``) and switched off (``MMEVT_PATCHES=-atomic-local-writes``),
alternating over ``--rounds`` so a shared machine's drift hits both; medians are printed
per write, with the ratio (``--jsonl``: also appended as records, what the docs' table is
written from). Files go to a temporary directory on the file system of
``--dir`` (default: the system's temporary directory).
"""
import argparse
import json
import os
import os.path as osp
import statistics
import subprocess
import sys
import tempfile

# records_to_docs.py beside this file writes the docs' tables: project code, not the package's
sys.path.append(osp.dirname(osp.abspath(__file__)))

ONE_RUN = '''
import json, os, sys, time
import torch
import mmevt, mmengine
from mmengine.runner.checkpoint import save_checkpoint
work, dumps, checkpoints = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start = time.perf_counter()
for i in range(dumps):
    mmengine.dump({'iter': i, 'loss': 0.5, 'lr': 1e-4}, os.path.join(work, f'{i % 10}.json'))
mid = time.perf_counter()
state = {'state_dict': {'w': torch.zeros(1024, 1024)}}
for i in range(checkpoints):
    save_checkpoint(state, os.path.join(work, f'iter_{i % 3}.pth'))
end = time.perf_counter()
print(json.dumps({'dump': (mid - start) / dumps, 'checkpoint': (end - mid) / checkpoints}))
'''


def one_run(patched: bool, directory: str, dumps: int, checkpoints: int) -> dict:
    """Seconds per json dump and per checkpoint in one fresh process."""
    env = dict(os.environ)
    env['MMEVT_PATCHES'] = '' if patched else '-atomic-local-writes'
    with tempfile.TemporaryDirectory(dir=directory) as work:
        out = subprocess.run([sys.executable, '-c', ONE_RUN, work, str(dumps), str(checkpoints)],
                             env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--dumps', type=int, default=300)
    parser.add_argument('--checkpoints', type=int, default=20)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--dir', default=None, help='where the files are written')
    parser.add_argument('--jsonl', help='append each write kind as a row to this JSON-lines '
                        'records file')
    args = parser.parse_args()
    times = {True: [], False: []}
    for _ in range(args.rounds):
        for patched in (False, True):
            times[patched].append(one_run(patched, args.dir, args.dumps, args.checkpoints))
    import torch

    from records_to_docs import write_cost_table

    from mmevt.analysis.records import append_row, machine
    rows = [dict(write=kind, off_s=statistics.median(t[kind] for t in times[False]),
                 on_s=statistics.median(t[kind] for t in times[True]), dumps=args.dumps,
                 checkpoints=args.checkpoints, rounds=args.rounds,
                 **machine(torch.device('cpu')))
            for kind in ('dump', 'checkpoint')]
    for row in rows:
        append_row(args.jsonl, row)
    print('\n'.join(write_cost_table(rows)))


if __name__ == '__main__':
    main()
