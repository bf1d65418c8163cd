"""The modules of SRC's model that read the backbone, and their input channels remapped.

The consumers are the neck (the module the toolkit feeds the backbone's outputs to), else
the heads, including nested ones (KNet's ``kernel_generate_head``); a neck that only pools
(mmpretrain's ``GlobalAveragePooling``) passes its input on to the head, and one that
concatenates the maps (mmpose's ``FeatureMapProcessor(concat=True)``) gives the head the sum
of their channels. Only their input-channel keys (:data:`CHANNEL_KEYS`) change (and a map
size a head flattens, mmpose's ``in_featuremap_size``), and each old value must equal what
the built backbone measured, else the swap stops with an error naming the module.
"""
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..utils.lists import as_list
from .probe import EVT_STRIDES, BackboneOutputs

# Model keys holding a head that reads the backbone when there is no neck (``cls_head``:
# mmaction2's recognizers, e.g. TSNHead reading each frame's last map).
HEAD_KEYS = ('decode_head', 'auxiliary_head', 'head', 'panoptic_head', 'bbox_head',
             'rpn_head', 'mask_head', 'cls_head')
# The keys that name a module's inputs from the backbone.
CHANNEL_KEYS = ('in_channels', 'c1_in_channels')
# Necks without channel arguments that concatenate the maps they select (each resized to
# the first one's size) into one: mmpose's bottom-up DEKR / CID.
CONCAT_NECKS = ('FeatureMapProcessor', )

ModelPath = Tuple[Any, ...]  # keys from ``model``; an int indexes a list of heads


def dotted_path(path: ModelPath) -> str:
    """``path`` as the user writes it: ``model.roi_head.bbox_head``."""
    return 'model.' + '.'.join(str(p) for p in path)


def concatenated_outputs(neck: Any, n: int) -> Optional[List[int]]:
    """The backbone outputs a concatenating neck (:data:`CONCAT_NECKS` with
    ``concat=True``) joins into one map, after its ``select_index``; None for other necks.

    Args:
        neck (dict | None): SRC's ``model.neck``.
        n (int): the number of backbone outputs.
    """
    if not isinstance(neck, dict) or neck.get('type') not in CONCAT_NECKS \
            or not neck.get('concat'):
        return None
    index = neck.get('select_index')
    return list(range(n)) if index is None else [i % n for i in as_list(index)]


def remap_channels(cfg: dict, where: str, outputs: BackboneOutputs, stages: List[int],
                   dims: Sequence[int], concat: Optional[Sequence[int]] = None
                   ) -> Dict[str, Any]:
    """New input-channel values of one consumer config ``cfg`` (at ``where``).

    ``in_channels`` is read through ``in_index`` when the module has one (mmseg's decode
    heads), else as one entry per backbone output (a list) or the last output (an int:
    mmdet's CTResNetNeck, mmpretrain's, mmpose's and mmaction2's heads), or as the sum of
    the outputs a neck concatenates (``concat``); ``c1_in_channels`` (mmseg's
    DepthwiseSeparableASPPHead) reads the first output. Every old value must equal the
    measured channels of the output it reads.

    Args:
        cfg (dict): the consumer's config.
        where (str): its place, for errors (:func:`dotted_path`).
        outputs (BackboneOutputs): the original backbone's measured outputs.
        stages (list[int]): the EVT stage of each output (:func:`map_outputs`).
        dims (Sequence[int]): the EVT arch's channels of each stage.
        concat (Sequence[int], optional): the outputs a neck concatenates before this
            module (:func:`concatenated_outputs`). Defaults to None (no such neck).

    Returns:
        dict: the new values of the consumer's :data:`CHANNEL_KEYS`.

    Raises:
        ValueError: an old value does not match the outputs it reads, or the consumer has
            no channel key.
    """
    n = len(outputs.channels)
    new: Dict[str, Any] = {}
    kind = cfg.get('type', '?')

    def read(key: str, value: Any, index: List[int]) -> Any:
        olds = as_list(value)
        if len(olds) != len(index):
            raise ValueError(f'{where} ({kind}): {key}={value!r} has {len(olds)} entries, '
                             f'but it reads backbone outputs {index}')
        for old, i in zip(olds, index):
            if old != outputs.channels[i]:
                raise ValueError(f'{where} ({kind}): {key}={value!r} does not match the '
                                 f'backbone outputs it reads ({outputs.describe()}); '
                                 'cannot tell which outputs it consumes')
        vals = [dims[stages[i]] for i in index]
        return vals if isinstance(value, (list, tuple)) else vals[0]

    if 'in_channels' in cfg and concat and isinstance(cfg['in_channels'], int):
        total = sum(outputs.channels[i] for i in concat)
        if cfg['in_channels'] != total:
            raise ValueError(f"{where} ({kind}): in_channels={cfg['in_channels']} is not the "
                             f'sum of the concatenated backbone outputs {list(concat)} '
                             f'({outputs.describe()}: {total})')
        new['in_channels'] = sum(dims[stages[i]] for i in concat)
    elif 'in_channels' in cfg:
        value = cfg['in_channels']
        if 'in_index' in cfg:
            index = [i % n for i in as_list(cfg['in_index'])]
        elif isinstance(value, (list, tuple)):
            index = list(range(n))
        else:
            index = [n - 1]
        new['in_channels'] = read('in_channels', value, index)
    if 'c1_in_channels' in cfg:
        new['c1_in_channels'] = read('c1_in_channels', cfg['c1_in_channels'], [0])
    if not new:
        raise ValueError(f'{where} ({kind}) reads the backbone but has no '
                         f'{" / ".join(CHANNEL_KEYS)} to remap; this consumer is not '
                         'supported')
    return new


def remap_featuremap_size(cfg: dict, where: str, outputs: BackboneOutputs,
                          stages: List[int]) -> Dict[str, Any]:
    """A new ``in_featuremap_size`` for a head that flattens the map it reads (mmpose's
    ``SimCCHead`` / ``RTMCCHead``: ``(W, H)`` of the last output), where EVT's map differs.

    EVT rounds map sizes up (``ceil(input / stride)``), so the size follows from the head's
    ``input_size`` and the stride of the EVT stage read; it is unchanged where that stride
    is the original output's and ``input_size`` a multiple of it.

    Args:
        cfg (dict): the head's config.
        where (str): its place, for errors (:func:`dotted_path`).
        outputs (BackboneOutputs): the original backbone's measured outputs.
        stages (list[int]): the EVT stage of each output (:func:`map_outputs`).

    Returns:
        dict: ``{'in_featuremap_size': (W, H)}`` where it changes, else empty.

    Raises:
        ValueError: the head has ``in_featuremap_size`` but no ``input_size`` to derive it.
    """
    if 'in_featuremap_size' not in cfg:
        return {}
    if 'input_size' not in cfg:
        raise ValueError(f'{where} ({cfg.get("type", "?")}) has in_featuremap_size but no '
                         "input_size: cannot derive EVT's map size")
    stride = EVT_STRIDES[stages[-1]]
    size = tuple(math.ceil(s / stride) for s in cfg['input_size'])
    return {} if size == tuple(cfg['in_featuremap_size']) else {'in_featuremap_size': size}


def _nested_consumers(cfg: dict, path: ModelPath) -> List[Tuple[ModelPath, dict]]:
    """Dicts inside a head config that read the backbone: those with an ``in_index``."""
    found = []
    for key, value in cfg.items():
        for j, item in enumerate(as_list(value)):
            if isinstance(item, dict):
                sub = path + ((key, ) if not isinstance(value, (list, tuple)) else (key, j))
                if 'in_index' in item and 'in_channels' in item:
                    found.append((sub, item))
                else:
                    found.extend(_nested_consumers(item, sub))
    return found


def find_consumers(model_cfg: dict) -> Tuple[List[Tuple[ModelPath, dict]], List[str]]:
    """The modules of ``model_cfg`` that read the backbone's outputs, as (path, cfg).

    The toolkits feed the backbone's outputs to the neck when there is one
    (``extract_feat``); a neck without channel arguments only pools and passes them on to
    the head. Without a neck every head reads the backbone; a head without
    ``in_channels`` is searched for nested heads with an ``in_index`` (KNet's
    ``kernel_generate_head``).

    Args:
        model_cfg (dict): SRC's ``model``.

    Returns:
        tuple: the consumers as ``(path, cfg)`` pairs, and notes for the user.

    Raises:
        ValueError: a list of necks, a C4 detector's shared head, or no consumer found.
    """
    notes: List[str] = []
    neck = model_cfg.get('neck')
    if isinstance(neck, (list, tuple)):
        raise ValueError(f'model.neck is a list of {len(neck)} necks; only a single neck '
                         'is supported')
    if neck:
        if any(k in neck for k in CHANNEL_KEYS):
            return [(('neck', ), neck)], notes
        if neck.get('type') in CONCAT_NECKS and neck.get('concat'):
            notes.append(f"neck {neck.get('type')} concatenates the backbone's maps: the "
                         'head reads the sum of their channels')
        else:
            notes.append(f"neck {neck.get('type')} has no channel arguments: it passes the "
                         'backbone channels on to the head')
    roi = model_cfg.get('roi_head')
    if not neck and isinstance(roi, dict) and roi.get('shared_head'):
        raise ValueError(f"model.roi_head.shared_head ({roi['shared_head'].get('type')}) "
                         'runs a backbone stage inside the RoI head (a C4 detector); it '
                         'cannot be swapped: use an FPN config of the same detector')
    found = []
    for key in HEAD_KEYS:
        head = model_cfg.get(key)
        if not head:
            continue
        for j, item in enumerate(as_list(head)):
            path = (key, ) if not isinstance(head, (list, tuple)) else (key, j)
            if any(k in item for k in CHANNEL_KEYS):
                found.append((path, item))
            else:
                nested = _nested_consumers(item, path)
                if not nested:
                    raise ValueError(f'{dotted_path(path)} ({item.get("type")}) has no '
                                     'in_channels and no nested head with in_index; cannot '
                                     'find what reads the backbone')
                found.extend(nested)
    if not found:
        raise ValueError(f'{model_cfg.get("type")}: no neck and no head reads the backbone '
                         f'(looked for neck and {list(HEAD_KEYS)})')
    return found, notes
