"""mmevt's configs as a package of the OpenMMLab hub: ``mmevt::`` config paths and the
classification model names in mmpretrain.

``import mmevt`` calls :func:`enable_config_prefix` and :func:`register_model_names`, so that

- a config can inherit ``_base_ = 'mmevt::det/mask_rcnn/mask-rcnn_evt-s_fpn_1x_coco.py'``
  and ``mmengine.hub.get_config('mmevt::cls/evt/evt-t_8xb128_in1k.py')`` works, once
  mmevt is installed from a wheel (which carries ``mmevt/.mim/configs``, ``.mim/tools`` and
  ``.mim/model-index.yml``: ``setup.py``);
- ``mmpretrain.get_model('evt-t_8xb128_in1k')``, ``list_models('*evt*')`` and
  ``ImageClassificationInferencer`` know the names of ``configs/cls/metafile.yml``.
"""
import functools
import os.path as osp
import warnings
from typing import Dict, List, Optional

PACKAGE = 'mmevt'
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


def enable_config_prefix() -> None:
    """Let mmengine resolve ``mmevt::<path>`` config paths.

    mmengine 0.10.7 resolves ``pkg::`` only for packages listed in
    ``mmengine.config.utils.MODULE2PACKAGE`` (module -> pip distribution name), then reads
    ``<installed pkg>/.mim/configs/<path>``. Only an installed wheel has that directory:
    mmengine locates it through the distribution's install location, which for an editable
    install is site-packages, not the checkout.
    """
    from mmengine.config.utils import MODULE2PACKAGE
    MODULE2PACKAGE.setdefault(PACKAGE, PACKAGE)


@functools.lru_cache(maxsize=None)
def _config_index(package_path: str) -> Dict[str, dict]:
    """Config name -> model entry over every metafile of ``<package_path>/.mim``, read once.

    The same index mmengine 0.10.7's ``config.utils._get_cfg_metainfo`` builds (entries
    without ``Config`` skipped, the first weight of a config kept), which it rebuilds for
    every ``pkg::`` base of every config it parses.
    """
    from mmengine.fileio import load
    index = load(osp.join(package_path, '.mim', 'model-index.yml'))
    configs: Dict[str, dict] = {}
    for meta in index['Import']:
        for model in load(osp.join(package_path, '.mim', meta))['Models']:
            if 'Config' in model:
                configs.setdefault(model['Config'].partition('/')[-1], model)
    return configs


def _cached_cfg_metainfo(package_path: str, cfg_path: str) -> dict:
    """``_get_cfg_metainfo`` over :func:`_config_index` (same result, same ``ValueError``)."""
    configs = _config_index(package_path)
    if cfg_path not in configs:
        raise ValueError(f'Expected configs: {configs.keys()}, but got {cfg_path}')
    return configs[cfg_path]


def enable_config_index_cache() -> None:
    """Read each toolkit's metafiles once per process when resolving ``pkg::`` bases.

    mmengine 0.10.7 looks every ``mmdet::`` / ``mmseg::`` / ``mmpretrain::`` base up in the
    package's model index first (several hundred YAML files for mmdet) and only then falls
    back to ``.mim/configs/<path>``; that look-up is most of the time ``Config.fromfile``
    takes for a config with such bases. The metafiles of an
    installed package do not change while a process runs, so the index is cached; the
    answer, and the ``ValueError`` that makes mmengine fall back, are unchanged. A no-op when
    mmengine has no such function.
    """
    from mmengine.config import utils
    original = getattr(utils, '_get_cfg_metainfo', None)
    if callable(original) and original is not _cached_cfg_metainfo:
        _cached_cfg_metainfo.__wrapped__ = original  # what it stands for (tests compare)
        utils._get_cfg_metainfo = _cached_cfg_metainfo


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
