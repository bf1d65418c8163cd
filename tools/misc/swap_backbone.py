#!/usr/bin/env python
"""Swap EVT into any OpenMMLab config: write DST inheriting SRC, optionally check it.

Usage: python tools/misc/swap_backbone.py SRC --arch ARCH --out DST [--pretrained PATH]
           [--recipe evt|keep] [--check] [--overwrite]

SRC is a config file or an 'mmdet::' / 'mmseg::' / 'mmpretrain::' path. See mmevt/swap/
and docs/swap.md. Installed as the `mmevt-swap` command.
"""
from mmevt.swap import cli

if __name__ == '__main__':
    cli()
