"""Checkpoints: the weights inside one (:func:`unwrap_state_dict`) and pretrained backbone
weights loaded with every mismatch reported (:func:`load_backbone_checkpoint`).

How checkpoints are unpickled (``weights_only=True`` with an allow-list, on every stack) is
:mod:`mmevt.patches.checkpoint_loading`.
"""
import logging
import os.path as osp
import zipfile
from typing import Any, Dict, Mapping, Optional

from torch import nn



# wrappers a checkpoint's weights come in, in the order they are looked for: OpenMMLab
# runners save ``state_dict``, the authors' RMT / timm-style releases ``model``
STATE_DICT_KEYS = ('state_dict', 'model')


def unwrap_state_dict(ckpt: Mapping) -> Dict[str, Any]:
    """The weights inside a loaded checkpoint: ``ckpt['state_dict']``, ``ckpt['model']``
    (the first of :data:`STATE_DICT_KEYS` holding a mapping), or ``ckpt`` itself (bare).

    Returns:
        dict: parameter name -> tensor (a new dict; the tensors are not copied).
    """
    for key in STATE_DICT_KEYS:
        if isinstance(ckpt.get(key), Mapping):
            return dict(ckpt[key])
    return dict(ckpt)


def load_backbone_checkpoint(model: nn.Module, ckpt: Optional[str],
                             prefix: Optional[str] = None, map_location: str = 'cpu',
                             owner: str = 'EVT') -> None:
    """Load a backbone's weights from ``ckpt`` (keys under ``prefix`` if given).

    Loaded through mmengine's ``CheckpointLoader`` (local files under ``weights_only``, URLs)
    but never silently partially: a missing file, a truncated one, tensors of the wrong shape
    and a file sharing no key with the model are errors naming the problem; missing and
    unexpected keys are logged (WARNING).

    Args:
        model (nn.Module): the backbone, loaded in place.
        ckpt (str, optional): a path or URL; the config key users set is
            ``init_cfg.checkpoint``.
        prefix (str, optional): keep only keys under it, stripped (e.g. ``'backbone.'``).
            Defaults to None.
        map_location (str): where tensors are loaded. Defaults to ``'cpu'``.
        owner (str): the model's name in messages. Defaults to ``'EVT'``.

    Raises:
        FileNotFoundError: ``ckpt`` is not given or not an existing file.
        ValueError: the file is not a checkpoint, or does not fit the model.
    """
    from mmengine.logging import print_log
    from mmengine.runner.checkpoint import CheckpointLoader
    if not ckpt or ('://' not in str(ckpt) and not osp.isfile(ckpt)):
        raise FileNotFoundError(
            f'init_cfg.checkpoint of {owner}: checkpoint file {ckpt!r} does not exist. '
            'Point init_cfg.checkpoint (e.g. model.backbone.init_cfg.checkpoint in the '
            'config, or --cfg-options) at an existing file.')
    try:
        loaded = CheckpointLoader.load_checkpoint(ckpt, map_location=map_location)
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile) as err:
        raise ValueError(f'init_cfg.checkpoint {ckpt!r} is truncated or not a PyTorch '
                         f'checkpoint: {err}') from err
    state = unwrap_state_dict(loaded)
    if prefix:
        state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    own = model.state_dict()
    shape_errors = [f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
                    for k, v in state.items() if k in own and v.shape != own[k].shape]
    if shape_errors:
        raise ValueError(f'{ckpt}: {len(shape_errors)} tensors have the wrong shape for '
                         f'this {owner} arch, e.g. {shape_errors[:3]}; is it a checkpoint of '
                         'another arch?')
    matched = {k: v for k, v in state.items() if k in own}
    if not matched:
        raise ValueError(f'{ckpt}: none of its {len(state)} tensors (prefix {prefix!r}) is '
                         f'an {owner} key, e.g. {sorted(state)[:3]} vs {sorted(own)[:3]}; set '
                         "init_cfg.prefix (e.g. 'backbone.') to match the checkpoint")
    model.load_state_dict(matched, strict=False)
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    print_log(f'{owner}: loaded {len(matched)}/{len(own)} tensors from {ckpt}'
              + (f'; missing (kept at init): {missing}' if missing else '')
              + (f'; unexpected (ignored): {unexpected}' if unexpected else ''),
              logger='current', level=logging.WARNING if missing or unexpected
              else logging.INFO)
