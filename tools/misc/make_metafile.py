#!/usr/bin/env python
"""Write configs/cls/metafile.yml (the model names mmpretrain's ModelHub gets from
`import mmevt`) from the configs under configs/cls.

Usage: python tools/misc/make_metafile.py [--check]

A build step, kept out of the runtime package (``mmevt.hub`` only registers the names the
file lists, at import); ``tests/test_packaging.py`` checks that the file is up to date.
"""
import argparse
import glob
import os.path as osp
import sys

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
METAFILE = 'configs/cls/metafile.yml'
# configs/cls/<dir> -> its collection in the metafile
CLS_COLLECTIONS = {
    'evt': 'EVT',
    'evt-swin': 'EVT-Swin',
    'rmt': 'RMT',
    'ablation': 'EVT token-mixer ablations',
}
METAFILE_HEAD = """\
# Model names of the classification configs, for mmpretrain's ModelHub (`import mmevt`
# registers them: mmpretrain.get_model / list_models / inferencers) and for
# mmengine.hub.get_config('mmevt::cls/...'). No weights are published: load your own with
# get_model(NAME, pretrained=PATH). Written by tools/misc/make_metafile.py from the files
# under configs/cls (tests/test_packaging.py checks that it is up to date).
Collections:
  - Name: EVT
    Metadata:
      Training Data: ImageNet-1k
      Architecture:
        - Euclidean spatial decay attention (EuSA)
        - 1D token grouping (EuSA-g / EuSA-d)
    Paper:
      Title: Advancing Vision Transformer with Enhanced Spatial Priors
      URL: https://arxiv.org/abs/2604.18549
  - Name: EVT-Swin
    Metadata:
      Training Data: ImageNet-1k
      Architecture:
        - Euclidean spatial decay attention (EuSA) in Swin's layout
    Paper:
      Title: Advancing Vision Transformer with Enhanced Spatial Priors
      URL: https://arxiv.org/abs/2604.18549
  - Name: RMT
    Metadata:
      Training Data: ImageNet-1k
      Architecture:
        - Manhattan spatial decay attention (MaSA)
        - decomposed MaSA
    Paper:
      Title: "RMT: Retentive Networks Meet Vision Transformers"
      URL: https://arxiv.org/abs/2309.11523
  - Name: EVT token-mixer ablations
    Metadata:
      Training Data: ImageNet-1k
Models:
"""


def render_metafile(repo: str) -> str:
    """The text of ``configs/cls/metafile.yml``: one model per config under ``configs/cls``
    (named after its file), in the collection of its directory (:data:`CLS_COLLECTIONS`).

    Args:
        repo (str): the source checkout.

    Returns:
        str: the YAML text.
    """
    lines = []
    cls_dir = osp.join(repo, 'configs', 'cls')
    for path in sorted(glob.glob(osp.join(cls_dir, '**', '*.py'), recursive=True)):
        rel = osp.relpath(path, repo).replace(osp.sep, '/')
        family = osp.relpath(path, cls_dir).split(osp.sep)[0]
        if family == '_base_' or osp.sep + '_base_' + osp.sep in path:
            continue  # partial configs, not models
        if family not in CLS_COLLECTIONS:
            raise ValueError(f'{rel}: configs/cls/{family} has no collection; add it to '
                             f'CLS_COLLECTIONS in tools/misc/make_metafile.py (known: '
                             f'{list(CLS_COLLECTIONS)})')
        lines += [f'  - Name: {osp.splitext(osp.basename(path))[0]}',
                  f'    In Collection: {CLS_COLLECTIONS[family]}',
                  f'    Config: {rel}']
    return METAFILE_HEAD + '\n'.join(lines) + '\n'


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
