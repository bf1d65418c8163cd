"""mmevt's configs as a package of the OpenMMLab hub: ``mmevt::`` config paths and the
classification model names in mmpretrain.

``import mmevt`` enables ``mmevt::`` (:mod:`mmevt.patches.config_resolution`) and calls
:func:`register_model_names`, so that

- a config can inherit ``_base_ = 'mmevt::det/mask_rcnn/mask-rcnn_evt-s_fpn_1x_coco.py'``
  and ``mmengine.hub.get_config('mmevt::cls/evt/evt-t_8xb128_in1k.py')`` works, once
  mmevt is installed from a wheel (which carries ``mmevt/.mim/configs``, ``.mim/tools`` and
  ``.mim/model-index.yml``: ``setup.py``);
- ``mmpretrain.get_model('evt-t_8xb128_in1k')``, ``list_models('*evt*')`` and
  ``ImageClassificationInferencer`` know the names of the classification metafiles
  (``configs/cls/*/metafile.yml``).

``model-index.yml`` imports the metafiles of every task (OpenMMLab's model-index format);
mmpretrain gets the classification ones only (:data:`HUB_TASK_DIR`).

Only what runs at import is here; writing that metafile from the configs is a build step,
``tools/misc/make_metafile.py``.
"""
import os.path as osp
import warnings
from typing import List, Optional


MODEL_INDEX = 'model-index.yml'
# the metafiles mmpretrain's ModelHub gets: its models are classifiers
HUB_TASK_DIR = 'configs/cls/'


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
    """Register the classification metafiles of the model index (:func:`hub_metafiles`)
    with mmpretrain's ``ModelHub``.

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
    taken = [name for name in names if ModelHub.has(name)]
    if taken:  # checked before registering any: a clash must not leave half of ours in
        warnings.warn(f'mmevt: model names not registered with mmpretrain: {taken} are '
                      'registered already')
        return []
    try:
        for meta in hub_metafiles(root):  # a metafile is a model index of its own
            ModelHub.register_model_index(osp.join(root, meta), config_prefix=root)
    except ValueError as err:  # a name clash with models registered by someone else
        warnings.warn(f'mmevt: model names not registered with mmpretrain: {err}')
        return []
    return names


def hub_metafiles(root: str) -> List[str]:
    """The metafiles of ``<root>/model-index.yml`` whose models mmpretrain builds: those
    under ``configs/cls/`` (:data:`HUB_TASK_DIR`).

    Args:
        root (str): directory of ``model-index.yml`` (see :func:`mim_root`).

    Returns:
        list[str]: paths relative to ``root``, in index order.
    """
    from mmengine.fileio import load
    index = load(osp.join(root, MODEL_INDEX))
    return [meta for meta in index['Import'] if meta.startswith(HUB_TASK_DIR)]


def model_names(root: str) -> List[str]:
    """Model names listed by the classification metafiles (:func:`hub_metafiles`).

    Args:
        root (str): directory of ``model-index.yml`` (see :func:`mim_root`).

    Returns:
        list[str]: lower-case names, in file order.
    """
    from mmengine.fileio import load
    names = []
    for meta in hub_metafiles(root):
        names += [m['Name'].lower() for m in load(osp.join(root, meta))['Models']]
    return names
