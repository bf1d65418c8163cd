#!/usr/bin/env python
"""Print params and FLOPs (multiply-adds) of every EVT / EVT-Swin / RMT arch.

    python tools/analysis/complexity.py [--size 224 224] [--arch evt-t rmt-t ...]
    python tools/analysis/complexity.py --fvcore      # also fvcore's count (the authors')
    python tools/analysis/complexity.py --breakdown   # MACs by kind of layer

Counts the classifier (backbone + the authors' 1024-wide RMT head, 1000 classes, unless the
name ends in ``+linear``) and the backbone alone; attention matmuls are counted even where a fused kernel runs them. FLOPs
are printed in two units: G = 1e9 multiply-adds, and Gi = 2**30 (the RMT authors' published
figures are fvcore's count divided by 2**30: see docs/model_zoo.md). The row
``rmt-t@2-2-10-2`` is RMT-T at EVT-T's depth, for the paper's "RMT-T -> EVT-T" statement;
``evt-swin-t+linear`` (etc.) count EVT-Swin with Swin's linear head, as its ImageNet configs.
"""
import argparse
import json

ARCHS = ['evt-t', 'evt-s', 'evt-b', 'evt-l', 'evt-swin-t', 'evt-swin-s', 'evt-swin-b',
         'evt-swin-t+linear', 'evt-swin-s+linear', 'evt-swin-b+linear',
         'rmt-t', 'rmt-s', 'rmt-b', 'rmt-l', 'rmt-t@2-2-10-2']
AUTHORS_GFLOPS = {'rmt-t': 2.5, 'rmt-s': 4.5, 'rmt-b': 9.7, 'rmt-l': 18.2}  # theirs, at 224
GI = 2**30


def resolve(name: str):
    """An arch name, or ``rmt-t@D1-D2-D3-D4``: a zoo arch with other depths."""
    name = name.replace('+linear', '')
    if '@' not in name:
        return name
    from mmevt.models.backbones.evt import resolve_arch
    arch, depths = name.split('@')
    return dict(resolve_arch(arch), depths=[int(d) for d in depths.split('-')])


def fvcore_flops(arch, size) -> float:
    """fvcore's ``FlopCountAnalysis`` total of the classifier (attention on the reference
    path so its matmuls are visible to the tracer); fvcore also counts norms."""
    import logging
    import warnings

    import torch
    warnings.filterwarnings('ignore', message='.*torch.jit.script.*')  # fvcore traces with jit
    from fvcore.nn import FlopCountAnalysis

    from mmevt.analysis.complexity import _RMTClassifier, reference_attention
    logging.getLogger('fvcore').setLevel(logging.ERROR)
    from mmevt.analysis.complexity import _LinearClassifier
    model = (_LinearClassifier if '+linear' in arch else _RMTClassifier)(resolve(arch)).eval()
    with torch.no_grad(), reference_attention(model):
        counter = FlopCountAnalysis(model, torch.zeros((1, 3) + tuple(size)))
        counter.unsupported_ops_warnings(False)
        counter.uncalled_modules_warnings(False)
        return float(counter.total())


def breakdown(archs, size) -> None:
    from mmevt.analysis import macs_breakdown
    from mmevt.analysis.complexity import _RMTClassifier
    rows = {a: macs_breakdown(_RMTClassifier(resolve(a)), (1, 3) + tuple(size)) for a in archs}
    kinds = [k for k in next(iter(rows.values())) if k != 'total']
    print('| arch | ' + ' | '.join(kinds) + ' | total |  GMACs (1e9), classifier')
    print('|---' * (len(kinds) + 2) + '|')
    for a, r in rows.items():
        print(f'| {a} | ' + ' | '.join(f'{r[k] / 1e9:.3f}' for k in kinds) +
              f" | {r['total'] / 1e9:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--size', type=int, nargs=2, default=[224, 224], metavar=('H', 'W'))
    parser.add_argument('--arch', nargs='+', default=None)
    parser.add_argument('--breakdown', action='store_true',
                        help='MACs by kind of layer (default archs: rmt-t/s/b/l)')
    parser.add_argument('--fvcore', action='store_true',
                        help="also count the classifiers with fvcore, as the authors did "
                             "(needs `pip install fvcore`)")
    parser.add_argument('--json', help='also write the numbers to this JSON file')
    args = parser.parse_args()
    if args.breakdown:
        breakdown(args.arch or list(AUTHORS_GFLOPS), args.size)
        return
    if args.fvcore:
        try:
            import fvcore  # noqa: F401
        except ImportError:
            parser.error('--fvcore needs fvcore: pip install fvcore')
    from mmevt.analysis import model_complexity
    rows = {}
    extra = ' fvcore G | fvcore Gi |' if args.fvcore else ''
    print(f'| arch | params (M) | FLOPs (G) | FLOPs (Gi) | backbone params (M) | '
          f'backbone FLOPs (G) |{extra}  @ {args.size[0]}x{args.size[1]}')
    print('|---' * (6 + 2 * args.fvcore) + '|')
    for arch in args.arch or ARCHS:
        head = 'linear' if '+linear' in arch else 'rmt'
        c = rows[arch] = model_complexity(resolve(arch), tuple(args.size), head=head)
        line = (f"| {arch} | {c['params'] / 1e6:.2f} | {c['macs'] / 1e9:.2f} | "
                f"{c['macs'] / GI:.2f} | {c['backbone_params'] / 1e6:.2f} | "
                f"{c['backbone_macs'] / 1e9:.2f} |")
        if args.fvcore:
            c['fvcore'] = fvcore_flops(arch, args.size)
            line += f" {c['fvcore'] / 1e9:.3f} | {c['fvcore'] / GI:.2f} |"
        print(line, flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
