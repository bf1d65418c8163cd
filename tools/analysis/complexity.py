#!/usr/bin/env python
"""Print params and FLOPs (multiply-adds) of every EVT / EVT-Swin / RMT arch.

    python tools/analysis/complexity.py [--size 224 224] [--arch evt-t rmt-t ...]
    python tools/analysis/complexity.py --breakdown   # MACs by kind of layer, vs the authors

Counts the classifier (backbone + the authors' 1024-wide RMT head, 1000 classes) and the
backbone alone; attention matmuls are counted even where a fused kernel runs them.
``--breakdown`` splits the classifier's MACs by kind of layer and searches every subset of
those kinds for a counting convention that would reproduce the authors' RMT figures.
"""
import argparse
import itertools
import json

ARCHS = ['evt-t', 'evt-s', 'evt-b', 'evt-l', 'evt-swin-t', 'evt-swin-s', 'evt-swin-b',
         'rmt-t', 'rmt-s', 'rmt-b', 'rmt-l']
AUTHORS_GMACS = {'rmt-t': 2.5, 'rmt-s': 4.5, 'rmt-b': 9.7, 'rmt-l': 18.2}  # theirs, at 224


def breakdown(archs, size) -> None:
    from mmevt.analysis import macs_breakdown
    from mmevt.analysis.complexity import _RMTClassifier
    rows = {a: macs_breakdown(_RMTClassifier(a), (1, 3) + tuple(size)) for a in archs}
    kinds = [k for k in next(iter(rows.values())) if k != 'total']
    print('| arch | ' + ' | '.join(kinds) + ' | total |  GMACs, classifier')
    print('|---' * (len(kinds) + 2) + '|')
    for a, r in rows.items():
        print(f'| {a} | ' + ' | '.join(f'{r[k] / 1e9:.3f}' for k in kinds) +
              f" | {r['total'] / 1e9:.3f} |")
    rmt = [a for a in rows if a in AUTHORS_GMACS]
    if not rmt or tuple(size) != (224, 224):
        return

    def errors(left_out):
        return {a: (rows[a]['total'] - sum(rows[a][k] for k in left_out)) / 1e9 /
                AUTHORS_GMACS[a] - 1 for a in rmt}

    subsets = [s for r in range(len(kinds) + 1) for s in itertools.combinations(kinds, r)]
    best = min(subsets, key=lambda s: max(abs(e) for e in errors(s).values()))
    errs = ', '.join(f'{a} {100 * e:+.1f}%' for a, e in errors(best).items())
    print(f"closest convention to the authors' figures over all {len(subsets)} subsets of "
          f"kinds left out: leave out {list(best) or 'nothing'} -> {errs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--size', type=int, nargs=2, default=[224, 224], metavar=('H', 'W'))
    parser.add_argument('--arch', nargs='+', default=None)
    parser.add_argument('--breakdown', action='store_true',
                        help='MACs by kind of layer (default archs: rmt-t/s/b/l)')
    parser.add_argument('--json', help='also write the numbers to this JSON file')
    args = parser.parse_args()
    if args.breakdown:
        breakdown(args.arch or list(AUTHORS_GMACS), args.size)
        return
    from mmevt.analysis import model_complexity
    rows = {}
    print(f'| arch | params (M) | FLOPs (G) | backbone params (M) | backbone FLOPs (G) |'
          f'  @ {args.size[0]}x{args.size[1]}')
    print('|---|---|---|---|---|')
    for arch in args.arch or ARCHS:
        c = rows[arch] = model_complexity(arch, tuple(args.size))
        print(f"| {arch} | {c['params'] / 1e6:.2f} | {c['macs'] / 1e9:.2f} | "
              f"{c['backbone_params'] / 1e6:.2f} | {c['backbone_macs'] / 1e9:.2f} |", flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
