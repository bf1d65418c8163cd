#!/usr/bin/env python
"""Write configs/cls/metafile.yml (the model names mmpretrain's ModelHub gets from
`import mmevt`) from the configs under configs/cls.

Usage: python tools/misc/make_metafile.py [--check]
"""
import argparse
import os.path as osp
import sys

from mmevt.hub import METAFILE, render_metafile

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--check', action='store_true',
                        help='exit 1 if the file is not up to date; write nothing')
    args = parser.parse_args()
    path, text = osp.join(REPO, METAFILE), render_metafile(REPO)
    current = open(path).read() if osp.isfile(path) else None
    if args.check:
        sys.exit(0 if current == text else f'{METAFILE} is out of date: run {__file__}')
    with open(path, 'w') as f:
        f.write(text)
    print(f'wrote {METAFILE} ({text.count("In Collection:")} models)')


if __name__ == '__main__':
    main()
