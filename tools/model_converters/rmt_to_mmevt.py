#!/usr/bin/env python
"""Convert the RMT authors' released checkpoints to mmevt.

    python tools/model_converters/rmt_to_mmevt.py SRC DST [--config CONFIG]
        [--weights model|model_ema] [--backbone-only] [--force] [--trust-checkpoint]

The layout of SRC is detected from its keys (see docs/checkpoints.md):

- ImageNet classifiers (``{'model', 'model_ema', 'optimizer', 'args', ...}`` from the
  authors' ``main.py``, or a bare state dict): DST is an mmpretrain ``ImageClassifier``
  checkpoint for ``configs/cls/rmt/rmt-*_8xb128_in1k.py``. ``--weights`` picks the plain or
  EMA weights; by default those behind the authors' README number for the arch found in the
  file (plain for RMT-T, EMA for RMT-S/B/L).
- Token-labelled classifiers (with ``aux_head``): the same, for
  ``configs/cls/rmt/rmt-{s,b,l}-tl_8xb128_in1k.py``.
- COCO / ADE20K models (mmdet 2.x / mmseg 0.x, ``backbone.`` prefix): DST is an mmdet 3.x /
  mmseg 1.x checkpoint for the matching ``configs/det/**/*rmt-*`` or ``configs/seg/**/*rmt-*``
  config, which ``--config`` must name: the model it builds is checked key for key.

``--backbone-only`` writes bare backbone keys for ``init_cfg=dict(type='Pretrained',
checkpoint=DST)`` (a classifier DST also works with ``prefix='backbone.'``). With
``--config``, every key of DST is checked against the model the config builds; a missing,
unexpected or mis-shaped key is an error naming them, and nothing is written.

SRC is read with ``torch.load(weights_only=True)``, allowing only tensors, builtins,
``argparse.Namespace`` (the authors' ``args``) and OpenMMLab metadata. ``--trust-checkpoint``
turns that off: unpickling then runs whatever code the file holds; use it only for a file
whose origin you trust.
"""
import argparse
import os
import os.path as osp
import sys
from typing import List, Optional

import torch


def build_model_from_config(path: str, cfg_options: Optional[List[str]] = None
                            ) -> torch.nn.Module:
    """The model of an mmevt config (mmpretrain, mmdet or mmseg by its default scope).

    Weights are not initialised: ``init_cfg`` checkpoints are not read.
    """
    import importlib

    from mmengine.config import Config, DictAction
    from mmengine.registry import DefaultScope
    cfg = Config.fromfile(path)
    if cfg_options:
        parser = argparse.ArgumentParser()
        parser.add_argument('--cfg-options', nargs='+', action=DictAction)
        cfg.merge_from_dict(parser.parse_args(['--cfg-options', *cfg_options]).cfg_options)
    scope = cfg.get('default_scope')
    if scope not in ('mmpretrain', 'mmdet', 'mmseg'):
        raise ValueError(f'--config {path}: default_scope {scope!r} is not one of mmpretrain, '
                         f'mmdet, mmseg; is it an mmevt config?')
    with DefaultScope.overwrite_default_scope(scope):  # leaves no global scope behind
        return importlib.import_module(f'{scope}.registry').MODELS.build(cfg.model)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help="the authors' checkpoint")
    parser.add_argument('dst', help='output checkpoint path')
    parser.add_argument('--config', help='the mmevt config DST is for; required for '
                        'detection / segmentation files, optional for classifiers: DST is '
                        'checked key for key against the model it builds')
    parser.add_argument('--cfg-options', nargs='+', default=None,
                        help='key=value overrides for --config, as in tools/test.py')
    parser.add_argument('--weights', choices=['model', 'model_ema'],
                        help="ImageNet files: the authors' plain ('model') or EMA "
                        "('model_ema') weights. Default: those behind the authors' README "
                        'number for the detected arch (plain for RMT-T, EMA for S/B/L)')
    parser.add_argument('--backbone-only', action='store_true',
                        help='write bare backbone keys (no neck/heads, no prefix)')
    parser.add_argument('--force', action='store_true', help='overwrite DST if it exists')
    parser.add_argument('--trust-checkpoint', action='store_true',
                        help='unpickle SRC with weights_only=False: RUNS ANY CODE PICKLED IN '
                        'THE FILE; only for files whose origin you trust')
    args = parser.parse_args(argv)

    import mmevt  # noqa: F401  (registers modules; OpenMMLab safe-loading allow-list)
    from mmevt.models.backbones.evt import resolve_arch
    from mmevt.utils import rmt_convert as rc
    if not osp.isfile(args.src):
        parser.error(f'SRC checkpoint {args.src!r} does not exist')
    if osp.exists(args.dst) and not args.force:
        parser.error(f'DST {args.dst!r} exists; pass --force to overwrite it')
    if args.cfg_options and not args.config:
        parser.error('--cfg-options needs --config')

    try:
        ckpt = rc.load_authors_checkpoint(args.src, trust=args.trust_checkpoint)
        if args.trust_checkpoint:
            print('--trust-checkpoint: SRC was unpickled with weights_only=False')
        if not isinstance(ckpt, dict):
            raise ValueError(f'{args.src} holds a {type(ckpt).__name__}, not a checkpoint dict')
        held = [k for k in rc.WEIGHTS if isinstance(ckpt.get(k), dict)]
        probe = ckpt[held[0]] if held else rc.unwrap_state_dict(ckpt)
        layout = rc.detect_layout(probe)
        model = None
        if args.config:
            model = build_model_from_config(args.config, args.cfg_options)
        meta = dict(converted_from=osp.basename(args.src), layout=layout)
        if layout == 'dense':
            if args.weights:
                raise ValueError(f'--weights {args.weights}: {args.src} is a detection / '
                                 "segmentation checkpoint with one set of weights "
                                 "('state_dict'); drop --weights")
            state = rc.unwrap_state_dict(ckpt)
            arch = rc.detect_arch(state, prefix='backbone.')
            print(f"{args.src}: the authors' mmdet 2.x / mmseg 0.x layout, arch "
                  f'{arch or "unknown (no mmevt rmt-* arch matches)"}')
            if model is None and not args.backbone_only:
                raise ValueError('a detection / segmentation checkpoint needs --config: the '
                                 'mmevt config (configs/det/**/*rmt-* or configs/seg/**/'
                                 '*rmt-*) it will be evaluated with, so that every key is '
                                 'checked against that model')
            backbone = getattr(model, 'backbone', None)
            settings = (backbone.arch_settings if backbone is not None
                        else resolve_arch(arch) if arch else None)
            if settings is not None:
                rc.check_relpos(state, settings, prefix='backbone.')
            out_indices = backbone.out_indices if backbone is not None else None
            out, notes = rc.convert_rmt_dense(state, out_indices, args.backbone_only)
            for note in notes:
                print(note)
            eps = sorted({m.eps for n, m in backbone.named_children()
                          if n.startswith('norm') and hasattr(m, 'eps')}
                         ) if backbone is not None else []
            if eps and eps != [rc.AUTHORS_OUT_NORM_EPS]:
                print(f'WARNING: this config\'s backbone output norms have eps {eps}; the '
                      f'authors\' are nn.LayerNorm with eps {rc.AUTHORS_OUT_NORM_EPS}: set '
                      "model.backbone.out_norm_cfg=dict(type='LN', eps=1e-5) to compute "
                      'exactly what they did')
        else:
            arch = rc.detect_arch(probe)
            state, which, why = rc.select_weights(ckpt, args.weights, arch)
            if rc.detect_layout(state) != layout:
                raise ValueError(f"{args.src}: '{which}' is a {rc.detect_layout(state)} "
                                 f"state dict, '{held[0]}' a {layout} one")
            kind = 'token-labelled classifier' if layout == 'cls_token_label' else 'classifier'
            print(f"{args.src}: the authors' ImageNet {kind}, arch "
                  f'{arch or "unknown (no mmevt rmt-* arch matches)"}; converting '
                  f"'{which}' ({why})")
            if model is not None or arch is not None:
                rc.check_relpos(state, model.backbone.arch_settings if model is not None
                                else resolve_arch(arch))
            out = rc.convert_rmt(state, backbone_only=args.backbone_only)
            meta['weights'] = which
        meta['arch'] = str(arch)
        if model is not None:
            target = model.backbone if args.backbone_only else model
            rc.check_keys(out, target, 'backbone of --config' if args.backbone_only
                          else 'model of --config')
            target.load_state_dict(out, strict=True)  # also checks dtypes / copies
            print(f'checked: every key of {args.config} is in DST and nothing else')
    except ValueError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2

    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    tmp = args.dst + '.tmp'
    torch.save(dict(state_dict=out, meta=meta), tmp)
    os.replace(tmp, args.dst)  # never leave a half-written DST
    print(f'converted {len(out)} tensors -> {args.dst}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
