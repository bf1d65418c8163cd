#!/usr/bin/env python
"""Params and FLOPs of whole detection / segmentation models built from our configs.

    python tools/analysis/model_table.py det   # configs/det at 1280 x 800 (W x H)
    python tools/analysis/model_table.py seg   # configs/seg at 2048 x 512 (W x H)

Params are the whole model's. FLOPs are multiply-adds of one forward: for segmentation the
whole network (``model._forward``: backbone, neck, decode heads); for detection the feature
extractor (``model.extract_feat``: backbone + FPN), since the RoI heads' cost depends on the
number of proposals. They are counted by ``torch.utils.flop_counter`` with EVT's attention
routed through the explicit reference path (on the ``meta`` device: shapes only), so
attention matmuls are counted. Prints a markdown table with the papers' / authors' numbers
next to ours, labelled as theirs, and each config's recipe as the config states it
(lr, weight decay, drop path, images per GPU, warm-up iterations, training augmentation).
"""
import argparse
import glob
import importlib
import json
import os.path as osp
import re
import sys


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
        from mmevt.models.backbones.evt import resolve_arch
        drop_path = resolve_arch(cfg.model.backbone.arch)['drop_path_rate']
    return (f"{_num(opt.lr)} | {_num(opt.weight_decay)} | {drop_path:g} | "
            f"{cfg.train_dataloader.batch_size} | {warmup[0].end if warmup else 0} | {aug}")


def _measure(cfg_path: str, shape):
    import mmevt  # noqa: F401
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    from mmevt.analysis import count_macs, count_params
    cfg = Config.fromfile(cfg_path)
    row = recipe(cfg)
    cfg.model.backbone.init_cfg = None
    scope = cfg.default_scope
    with DefaultScope.overwrite_default_scope(scope):
        model = importlib.import_module(f'{scope}.registry').MODELS.build(cfg.model)
        if scope == 'mmdet':
            macs = count_macs(model, (1, 3) + tuple(shape), lambda m, x: m.extract_feat(x))
        else:
            macs = count_macs(model, (1, 3) + tuple(shape), lambda m, x: m._forward(x))
    return count_params(model), macs, row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('task', choices=['det', 'seg'])
    parser.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'),
                        help='default: 800 1280 (det), 512 2048 (seg)')
    parser.add_argument('--filter', default='', help='only configs whose name contains this')
    parser.add_argument('--json', help='also write the numbers here')
    args = parser.parse_args()
    shape = args.shape or ((800, 1280) if args.task == 'det' else (512, 2048))
    paths = sorted(glob.glob(osp.join(REPO, 'configs', args.task, '*', '*.py')))
    paths = [p for p in paths if args.filter in osp.basename(p) and '_base_' not in p]
    metric = 'box / mask AP' if args.task == 'det' else 'mIoU'
    what = 'backbone+FPN FLOPs' if args.task == 'det' else 'FLOPs'
    print(f'| config | lr | wd | drop path | img/GPU | warm-up | aug | params (M) '
          f'| {what} (G) @ {shape[1]}x{shape[0]} | their {metric} | our {metric} |')
    print('|---' * 11 + '|')
    rows = {}
    for path in paths:
        name = osp.splitext(osp.basename(path))[0]
        m = NAME.match(name)
        family, arch, sched = (m['family'], m['arch'], m['sched']) if m else (name, '', '')
        params, macs, row = _measure(path, shape)
        rows[name] = dict(params=params, macs=macs)
        # ablations change the model: the papers' number of the base config does not apply
        paper = '-' if 'ablation' in path else PAPER.get((family, sched, arch), '-')
        print(f'| {name} | {row} | {params / 1e6:.1f} | {macs / 1e9:.0f} | {paper} '
              '| not trained here |', flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    sys.exit(main())
