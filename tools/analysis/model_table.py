#!/usr/bin/env python
"""Params and FLOPs of whole detection / segmentation models built from our configs.

    python tools/analysis/model_table.py det   # configs/det at 1280 x 800 (W x H)
    python tools/analysis/model_table.py seg   # configs/seg at 2048 x 512 (W x H)

Counted as ``tools/analysis/get_flops.py`` counts (the same function,
:func:`mmevt.analysis.flops.config_complexity`): mmengine's ``FlopAnalyzer``, the toolkits'
counter, with fused attention counted; one FLOP per multiply-add, G = 1e9. Params are the
whole model's (auxiliary heads included). FLOPs: for segmentation the inference forward
(backbone, neck, decode head; the auxiliary head runs only in training); for detection the
feature extractor (``extract_feat``: backbone + FPN), since the RoI heads' cost depends on
the number of proposals. Prints a markdown table with the papers' / authors' numbers next
to ours, labelled as theirs, and each config's recipe as the config states it (lr, weight
decay, drop path, images per GPU, warm-up iterations, training augmentation).
"""
import argparse
import glob
import json
import os.path as osp
import re
import sys
from typing import Optional


REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

# The papers' / the RMT authors' README numbers; never measured here.
PAPER = {
    ('mask-rcnn', '1x', 'rmt-t'): 'authors: 47.1 / 42.6',
    ('mask-rcnn', '1x', 'rmt-s'): 'authors: 49.0 / 43.9',
    ('mask-rcnn', '1x', 'rmt-b'): 'authors: 51.1 / 45.5',
    ('mask-rcnn', '1x', 'rmt-l'): 'authors: 51.6 / 45.9',
    ('mask-rcnn', 'ms-3x', 'rmt-s'): 'authors: 50.7 / 44.9',
    ('mask-rcnn', 'ms-3x', 'rmt-b'): 'authors: 52.2 / 46.1',
    ('cascade-mask-rcnn', 'ms-3x', 'rmt-s'): 'authors: 53.2 / 46.1',
    ('cascade-mask-rcnn', 'ms-3x', 'rmt-b'): 'authors: 54.5 / 47.2',
    ('retinanet', '1x', 'rmt-t'): 'authors: 45.1',
    ('retinanet', '1x', 'rmt-s'): 'authors: 47.8',
    ('retinanet', '1x', 'rmt-b'): 'authors: 49.1',
    ('retinanet', '1x', 'rmt-l'): 'authors: 49.4',
    ('fpn', '80k', 'evt-t'): 'paper: 48.3',
    ('fpn', '80k', 'evt-s'): 'paper: 50.0',
    ('fpn', '80k', 'evt-b'): 'paper: 51.7',
    ('fpn', '80k', 'evt-l'): 'paper: 52.0',
    ('upernet', '160k', 'evt-b'): 'paper: 52.7',
    ('fpn', '80k', 'rmt-t'): 'authors: 46.4',
    ('fpn', '80k', 'rmt-s'): 'authors: 49.4',
    ('fpn', '80k', 'rmt-b'): 'authors: 50.4',
    ('fpn', '80k', 'rmt-l'): 'authors: 51.4',
    ('upernet', '160k', 'rmt-s'): 'authors: 49.8',
    ('upernet', '160k', 'rmt-b'): 'authors: 52.0',
    ('upernet', '160k', 'rmt-l'): 'authors: 52.8',
}
NAME = re.compile(r'^(?P<family>[a-z-]+?)_(?P<arch>(?:evt|rmt)(?:-swin)?-[tsbl])_.*?'
                  r'(?P<sched>1x|ms-3x|80k|160k)')


def _num(x: float) -> str:
    """1e-4 as ``1e-4``, 0.05 as ``0.05``."""
    return f'{x:.0e}'.replace('e-0', 'e-') if 0 < x < 1e-2 else f'{x:g}'


def recipe(cfg) -> str:
    """``lr | wd | drop path | images per GPU | warm-up | augmentation`` of a config."""
    opt = cfg.optim_wrapper.optimizer
    warmup = [s for s in cfg.param_scheduler if s.type == 'LinearLR']
    pipeline = cfg.train_dataloader.dataset.get('pipeline', [])
    types = {t.type for t in pipeline}
    aug = ('ms-crop' if 'RandomChoice' in types else
           'multi-scale' if 'RandomChoiceResize' in types else
           'random resize + crop' if 'RandomResize' in types else 'single-scale')
    drop_path = cfg.model.backbone.get('drop_path_rate')
    if drop_path is None:  # the arch's own (its ImageNet value)
        from mmevt.models.backbones.archs import resolve_arch
        drop_path = resolve_arch(cfg.model.backbone.arch)['drop_path_rate']
    return (f"{_num(opt.lr)} | {_num(opt.weight_decay)} | {drop_path:g} | "
            f"{cfg.train_dataloader.batch_size} | {warmup[0].end if warmup else 0} | {aug}")


def table_row(path: str, shape, flops_memo: Optional[dict] = None) -> dict:
    """One config's table row (markdown, without the trailing newline) and its numbers.

    Args:
        path (str): the config file.
        shape (tuple[int, int]): input ``(H, W)``.
        flops_memo (dict, optional): detection FLOPs by backbone + neck settings, shared
            between calls: configs that differ only in heads or recipe (1x / 3x, Mask /
            Cascade) have the same feature extractor, counted once. Defaults to None.

    Returns:
        dict: ``row`` (markdown), ``params`` and ``flops`` (the counted FLOPs column).
    """
    import mmevt  # noqa: F401
    from mmengine.config import Config

    from mmevt.analysis import config_complexity, count_params
    from mmevt.analysis.flops import build_from_config
    from mmevt.toolkits import get_toolkit
    cfg = Config.fromfile(path)
    det = get_toolkit(cfg.default_scope).tables_count_features_only
    key = repr((cfg.model.backbone, cfg.model.neck, tuple(shape))) if det else None
    if flops_memo is not None and key in flops_memo:
        params, flops = count_params(build_from_config(cfg)[0]), flops_memo[key]
    else:
        counts = config_complexity(cfg, shape, features_only=det)
        params, flops = counts['params']['total'], counts['flops']['total']
        if flops_memo is not None and det:
            flops_memo[key] = flops
    name = osp.splitext(osp.basename(path))[0]
    m = NAME.match(name)
    family, arch, sched = (m['family'], m['arch'], m['sched']) if m else (name, '', '')
    # ablations change the model: the papers' number of the base config does not apply
    paper = '-' if 'ablation' in path else PAPER.get((family, sched, arch), '-')
    row = (f'| {name} | {recipe(cfg)} | {params / 1e6:.1f} | {flops / 1e9:.0f} | {paper} '
           '| not trained here |')
    return dict(row=row, params=params, flops=flops)


def config_paths(task: str, name_filter: str = '') -> list:
    """The configs of ``task`` (``'det'`` or ``'seg'``) in table order."""
    paths = sorted(glob.glob(osp.join(REPO, 'configs', task, '*', '*.py')))
    return [p for p in paths if name_filter in osp.basename(p) and '_base_' not in p]


def header(task: str, shape) -> str:
    """The table's header and separator lines."""
    metric = 'box / mask AP' if task == 'det' else 'mIoU'
    what = 'backbone+FPN FLOPs' if task == 'det' else 'FLOPs'
    return (f'| config | lr | wd | drop path | img/GPU | warm-up | aug | params (M) '
            f'| {what} (G) @ {shape[1]}x{shape[0]} | their {metric} | our {metric} |\n'
            + '|---' * 11 + '|')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('task', choices=['det', 'seg'])
    parser.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'),
                        help='default: 800 1280 (det), 512 2048 (seg)')
    parser.add_argument('--filter', default='', help='only configs whose name contains this')
    parser.add_argument('--json', help='also write the numbers here')
    args = parser.parse_args()
    from mmevt.toolkits import TOOLKIT_TABLE
    # the toolkit whose configs folder the task is
    kit = next(kit for kit in TOOLKIT_TABLE.values() if kit.configs == args.task)
    shape = tuple(args.shape or kit.flops_shape)
    print(header(args.task, shape))
    rows, memo = {}, {}
    for path in config_paths(args.task, args.filter):
        result = table_row(path, shape, memo)
        rows[osp.splitext(osp.basename(path))[0]] = dict(params=result['params'],
                                                         flops=result['flops'])
        print(result['row'], flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    sys.exit(main())
