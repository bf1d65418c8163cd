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

The conversion is the library's :func:`mmevt.converters.rmt.convert_checkpoint`; this script
parses the arguments, builds the ``--config`` model (``mmevt.toolkits.build_model``) and
writes DST.
"""
import argparse
import os
import os.path as osp
import sys
from typing import Optional, Sequence

import torch
from mmengine.config import DictAction


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line (``parser.error`` exits 2 on a missing SRC, an existing DST or
    ``--cfg-options`` without ``--config``)."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help="the authors' checkpoint")
    parser.add_argument('dst', help='output checkpoint path')
    parser.add_argument('--config', help='the mmevt config DST is for; required for '
                        'detection / segmentation files, optional for classifiers: DST is '
                        'checked key for key against the model it builds')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default=None,
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
    if not osp.isfile(args.src):
        parser.error(f'SRC checkpoint {args.src!r} does not exist')
    if osp.exists(args.dst) and not args.force:
        parser.error(f'DST {args.dst!r} exists; pass --force to overwrite it')
    if args.cfg_options and not args.config:
        parser.error('--cfg-options needs --config')
    return args


def save(state: dict, meta: dict, dst: str) -> None:
    """Write ``{'state_dict', 'meta'}`` to ``dst`` through a temporary file, so that a
    half-written DST is never left behind."""
    os.makedirs(osp.dirname(osp.abspath(dst)), exist_ok=True)
    tmp = dst + '.tmp'
    torch.save(dict(state_dict=state, meta=meta), tmp)
    os.replace(tmp, dst)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Convert SRC to DST; 0 on success, 2 (nothing written) on an error, printed."""
    args = parse_args(argv)
    from mmevt.converters import rmt  # imports mmevt: registers modules, safe-loading list
    from mmevt.toolkits import build_model, load_config
    try:
        ckpt = rmt.load_authors_checkpoint(args.src, trust=args.trust_checkpoint)
        if args.trust_checkpoint:
            print('--trust-checkpoint: SRC was unpickled with weights_only=False')
        rmt.checkpoint_layout(ckpt, args.src)  # a file error comes before a config error
        model = None
        if args.config:
            model = build_model(load_config(args.config, args.cfg_options),
                                name=f'--config {args.config}')
        state, meta, _ = rmt.convert_checkpoint(
            ckpt, model, weights=args.weights, backbone_only=args.backbone_only,
            source=args.src, model_name='--config', on_note=print)
        if model is not None:
            print(f'checked: every key of {args.config} is in DST and nothing else')
    except ValueError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    save(state, meta, args.dst)
    print(f'converted {len(state)} tensors -> {args.dst}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
