"""mmevt's configs as a package of the OpenMMLab hub: ``mmevt::`` config paths and the
classification model names in mmpretrain.

``import mmevt`` enables ``mmevt::`` (:mod:`mmevt.patches.config_resolution`) and calls
:func:`register_model_names`, so that

- a config can inherit ``_base_ = 'mmevt::det/mask_rcnn/mask-rcnn_evt-s_fpn_1x_coco.py'``
  and ``mmengine.hub.get_config('mmevt::cls/evt/evt-t_8xb128_in1k.py')`` works, once
  mmevt is installed from a wheel (which carries ``mmevt/.mim/configs``, ``.mim/tools`` and
  ``.mim/model-index.yml``: ``setup.py``);
- ``mmpretrain.get_model('evt-t_8xb128_in1k')``, ``list_models('*evt*')`` and
  ``ImageClassificationInferencer`` know the names of ``configs/cls/metafile.yml``.
"""
import os.path as osp
import warnings
from typing import List, Optional

# where they lived before mmevt's patches moved to mmevt.patches (kept for one release)
from .patches.config_resolution import (PACKAGE, enable_config_index_cache,  # noqa: F401
                                        enable_config_prefix)
MODEL_INDEX = 'model-index.yml'
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


def mim_root() -> Optional[str]:
    """The directory holding ``model-index.yml`` and ``configs/``.

    Returns:
        str | None: ``<package>/.mim`` of an installed wheel, else the source checkout the
        package was imported from (editable install or ``PYTHONPATH``), else None (a
        wheel built without its package data).
    """
    pkg = osp.dirname(osp.abspath(__file__))
    for root in (osp.join(pkg, '.mim'), osp.dirname(pkg)):
        if osp.isfile(osp.join(root, MODEL_INDEX)) and osp.isdir(osp.join(root, 'configs')):
            return root
    return None


def register_model_names() -> List[str]:
    """Register ``configs/cls/metafile.yml`` (through the model index) with mmpretrain's
    ``ModelHub``.

    A no-op where mmpretrain is not installed, where the package data is absent, or where
    the names are already registered (a second import, e.g. ``importlib.reload``):
    ``ModelHub`` raises on a duplicate name, and mmevt must import anyway. A name taken by
    another package is reported with a warning and mmevt's names are then left out.

    Returns:
        list[str]: the model names known to ``ModelHub`` from mmevt's index (empty when
        nothing was registered).
    """
    try:
        from mmpretrain.apis import ModelHub
    except ImportError:
        return []
    root = mim_root()
    if root is None:
        return []
    names = model_names(root)
    if all(ModelHub.has(name) for name in names):
        return names
    try:
        ModelHub.register_model_index(osp.join(root, MODEL_INDEX), config_prefix=root)
    except ValueError as err:  # a name clash with models registered by someone else
        warnings.warn(f'mmevt: model names not registered with mmpretrain: {err}')
        return []
    return names


def render_metafile(repo: str) -> str:
    """The text of ``configs/cls/metafile.yml``: one model per config under ``configs/cls``
    (named after its file), in the collection of its directory (:data:`CLS_COLLECTIONS`).

    Args:
        repo (str): the source checkout.

    Returns:
        str: the YAML text.
    """
    import glob
    lines = []
    cls_dir = osp.join(repo, 'configs', 'cls')
    for path in sorted(glob.glob(osp.join(cls_dir, '**', '*.py'), recursive=True)):
        rel = osp.relpath(path, repo).replace(osp.sep, '/')
        family = osp.relpath(path, cls_dir).split(osp.sep)[0]
        if family == '_base_' or osp.sep + '_base_' + osp.sep in path:
            continue  # partial configs, not models
        if family not in CLS_COLLECTIONS:
            raise ValueError(f'{rel}: configs/cls/{family} has no collection; add it to '
                             f'mmevt.hub.CLS_COLLECTIONS (known: {list(CLS_COLLECTIONS)})')
        lines += [f'  - Name: {osp.splitext(osp.basename(path))[0]}',
                  f'    In Collection: {CLS_COLLECTIONS[family]}',
                  f'    Config: {rel}']
    return METAFILE_HEAD + '\n'.join(lines) + '\n'


def model_names(root: str) -> List[str]:
    """Model names listed by the metafiles that ``<root>/model-index.yml`` imports.

    Args:
        root (str): directory of ``model-index.yml`` (see :func:`mim_root`).

    Returns:
        list[str]: lower-case names, in file order.
    """
    from mmengine.fileio import load
    index = load(osp.join(root, MODEL_INDEX))
    names = []
    for meta in index['Import']:
        names += [m['Name'].lower() for m in load(osp.join(root, meta))['Models']]
    return names
