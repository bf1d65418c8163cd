#!/usr/bin/env python
"""Print params and FLOPs (multiply-adds) of every EVT / EVT-Swin / RMT arch.

    python tools/analysis/complexity.py [--size 224 224] [--arch evt-t rmt-t ...]

Counts the classifier (backbone + the authors' 1024-wide RMT head, 1000 classes) and the
backbone alone; attention matmuls are counted even where a fused kernel runs them.
"""
import argparse
import json

ARCHS = ['evt-t', 'evt-s', 'evt-b', 'evt-l', 'evt-swin-t', 'evt-swin-s', 'evt-swin-b',
         'rmt-t', 'rmt-s', 'rmt-b', 'rmt-l']


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--size', type=int, nargs=2, default=[224, 224], metavar=('H', 'W'))
    parser.add_argument('--arch', nargs='+', default=ARCHS)
    parser.add_argument('--json', help='also write the numbers to this JSON file')
    args = parser.parse_args()
    from mmevt.analysis import model_complexity
    rows = {}
    print(f'| arch | params (M) | FLOPs (G) | backbone params (M) | backbone FLOPs (G) |'
          f'  @ {args.size[0]}x{args.size[1]}')
    print('|---|---|---|---|---|')
    for arch in args.arch:
        c = rows[arch] = model_complexity(arch, tuple(args.size))
        print(f"| {arch} | {c['params'] / 1e6:.2f} | {c['macs'] / 1e9:.2f} | "
              f"{c['backbone_params'] / 1e6:.2f} | {c['backbone_macs'] / 1e9:.2f} |", flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
