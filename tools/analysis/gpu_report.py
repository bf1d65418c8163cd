#!/usr/bin/env python
"""The GPU session's results as markdown: versions, checks, tables, the auto rule, targets.

    python tools/analysis/gpu_report.py gpu_results/env.json gpu_results/rows.jsonl \
        [rerun/rows.jsonl ...] [-o report.md]

Rows of later files replace those of earlier ones for the same case (a rerun of a step).
"""
import argparse
import json
import sys

from mmevt.analysis.gpu_report import render
from mmevt.analysis.records import read_rows


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
