#!/usr/bin/env python
"""Convert the authors' RMT ImageNet checkpoints to mmevt keys.

    python tools/model_converters/rmt_to_mmevt.py SRC DST [--backbone-only] [--force]

Without ``--backbone-only`` DST is an mmpretrain ``ImageClassifier`` checkpoint
(``backbone.*``, ``neck.*``, ``head.fc.*``): use it with the ``rmt-*`` classification
configs, or as a backbone with ``init_cfg=dict(type='Pretrained', checkpoint=DST,
prefix='backbone.')``. With ``--backbone-only`` DST holds bare backbone keys for
``init_cfg=dict(type='Pretrained', checkpoint=DST)``.
"""
import argparse
import os
import os.path as osp
import sys

import torch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help="authors' checkpoint (bare state dict or {'model': ...})")
    parser.add_argument('dst', help='output checkpoint path')
    parser.add_argument('--backbone-only', action='store_true',
                        help='write bare backbone keys (no classifier, no prefix)')
    parser.add_argument('--force', action='store_true', help='overwrite DST if it exists')
    args = parser.parse_args(argv)

    import mmevt  # noqa: F401  (safe-loading allow-list)
    from mmevt.utils.rmt_convert import convert_rmt, unwrap_state_dict
    if not osp.isfile(args.src):
        parser.error(f'SRC checkpoint {args.src!r} does not exist')
    if osp.exists(args.dst) and not args.force:
        parser.error(f'DST {args.dst!r} exists; pass --force to overwrite it')
    ckpt = torch.load(args.src, map_location='cpu', weights_only=True)
    state = convert_rmt(unwrap_state_dict(ckpt), backbone_only=args.backbone_only)
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    tmp = args.dst + '.tmp'
    torch.save(dict(state_dict=state, meta=dict(converted_from=osp.basename(args.src))), tmp)
    os.replace(tmp, args.dst)  # never leave a half-written DST
    print(f'converted {len(state)} tensors -> {args.dst}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
