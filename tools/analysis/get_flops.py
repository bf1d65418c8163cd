#!/usr/bin/env python
"""Params and FLOPs of any mmdet / mmseg / mmpretrain / mmpose / mmaction2 config, without a
dataset.

    python tools/analysis/get_flops.py CONFIG                # the toolkit's usual size
    python tools/analysis/get_flops.py CONFIG --shape 800 1344
    python tools/analysis/get_flops.py CONFIG --features-only   # backbone + neck only
    python tools/analysis/get_flops.py CONFIG1 CONFIG2 ...       # one table per config

Counts like the toolkits' own ``get_flops.py`` (mmengine's ``FlopAnalyzer``: one FLOP per
multiply-add, G = 1e9, as mmdet's tool prints), with scaled-dot-product attention counted
(``import mmevt`` registers it), on one random image of ``--shape`` (default: 800 x 1280 for
detection, 512 x 2048 for segmentation, 224 x 224 for classification, 256 x 192 for pose;
padded as the config's data preprocessor pads; for an mmaction2 2D recognizer one clip of
the config's segments, each 224 x 224), no dataset needed. Prints the whole model and its
backbone, neck and heads (the rest). The forward pass is the toolkits' ``mode='tensor'``
one: no post-processing, no auxiliary heads; a two-stage detector's RoI heads cost what the
proposals its RPN keeps cost (their number is printed). Works on mmseg configs too, where
mmseg 1.2.2's own ``get_flops.py`` stops ("input_shape and inputs cannot be both set").
"""
import argparse
import json
import os.path as osp
import sys


def table(result: dict) -> str:
    """The markdown table of :func:`mmevt.analysis.flops.config_complexity`'s result."""
    lines = ['| part | params (M) | FLOPs (G) |', '|---|---|---|']
    for part in ('backbone', 'neck', 'heads', 'total'):
        flops = result['flops'][part]
        lines.append(f"| {part} | {result['params'][part] / 1e6:.2f} | "
                     f"{'not run' if flops is None else f'{flops / 1e9:.2f}'} |")
    return '\n'.join(lines)


def main(argv=None) -> None:
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('configs', nargs='+', metavar='CONFIG',
                        help='mmdet / mmseg / mmpretrain / mmpose / mmaction2 config files')
    parser.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'),
                        help='input size; default 800 1280 (det), 512 2048 (seg), 224 224 '
                             '(cls; a frame of an action clip), 256 192 (pose)')
    parser.add_argument('--features-only', action='store_true',
                        help='count extract_feat only (backbone + neck)')
    parser.add_argument('--device', default='cpu', help="where to count (default: 'cpu')")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value (as the toolkits\' tools)')
    parser.add_argument('--json', help='also write the numbers to this new file (by config)')
    args = parser.parse_args(argv)
    if args.shape and min(args.shape) < 1:
        parser.error(f'--shape needs positive H W, got {args.shape}')
    if args.json and osp.exists(args.json):
        parser.error(f'--json {args.json} exists; give a new file name')

    import mmevt  # noqa: F401  (our modules and the attention FLOP handle)
    from mmengine.config import Config

    from mmevt.analysis.flops import config_complexity
    results = {}
    for path in args.configs:
        cfg = Config.fromfile(path)
        if args.cfg_options:
            cfg.merge_from_dict(args.cfg_options)
        result = results[path] = config_complexity(cfg, args.shape, args.device,
                                                   args.features_only)
        shape = ' x '.join(str(d) for d in result['input_shape'])
        print(f"{path}: {result['scope']}, input {shape}")
        print("counter: mmengine's FlopAnalyzer (as the toolkits' get_flops.py) + mmevt's "
              'scaled_dot_product_attention handle; 1 FLOP = 1 multiply-add, G = 1e9')
        print(table(result))
        if result['proposals'] is not None:
            print(f"RoI heads counted on the {result['proposals']} proposals the RPN kept "
                  '(random weights, random image)')
        skipped = ', '.join(f'{op} x{n}' for op, n in sorted(result['unsupported'].items()))
        print(f'not counted by the counter: {skipped or "nothing"}\n', flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)


if __name__ == '__main__':
    sys.exit(main())
