"""The key mapping between the RMT authors' checkpoints and mmevt's models.

Pure renames of state dicts, both ways; reading the authors' files, choosing their weights
and checking the result against a model is :mod:`mmevt.converters.rmt`.

- classifier keys (``patch_embed.proj.N``, ``layers.i.*``, ``proj``, ``norm``, ``head``,
  token-labelled ``aux_head``; ``classfication_release/RMT.py`` in github.com/qhfan/RMT)
  <-> an mmpretrain ``ImageClassifier`` with EVT (:func:`convert_rmt`,
  :func:`convert_to_rmt`);
- mmdet 2.x / mmseg 0.x models (``backbone.`` + the classifier's backbone keys,
  ``backbone.extra_norms.i``, heads under their toolkit names) -> mmdet 3.x / mmseg 1.x
  (:func:`convert_rmt_dense`).

The authors' per-stage ``Relpos.decay`` / ``Relpos.angle`` buffers have no counterpart:
mmevt recomputes them (:func:`mmevt.converters.rmt.check_relpos` checks them).
"""
import re
from collections import OrderedDict
from typing import List, Mapping, Optional, Tuple

from torch import Tensor

# Authors' stem is one nn.Sequential: conv/BN pairs at 0-1, 3-4, 6-7, 9-10 (GELUs between).
_STEM = {'0': '0.conv', '1': '0.norm', '3': '1.conv', '4': '1.norm', '6': '2.conv',
         '7': '2.norm', '9': '3.conv', '10': '3.norm'}
_BLOCK = [
    ('pos.conv.', 'cpe.conv.'),
    ('retention_layer_norm.', 'norm1.'),
    ('retention.q_proj.', 'attn.q.'),
    ('retention.k_proj.', 'attn.k.'),
    ('retention.v_proj.', 'attn.v.'),
    ('retention.out_proj.', 'attn.proj.'),
    ('retention.lepe.conv.', 'attn.lepe.conv.'),
    ('final_layer_norm.', 'norm2.'),
    ('ffn.fc1.', 'ffn.fc1.'),
    ('ffn.fc2.', 'ffn.fc2.'),
    ('ffn.dwconv.conv.', 'ffn.dwconv.conv.'),
]
# ``aux_head`` (token labelling) -> RMTTokenLabelClsHead's ``aux_fc``
_HEAD = [('proj.', 'neck.proj.'), ('norm.', 'neck.norm.'), ('head.', 'head.fc.'),
         ('aux_head.', 'head.aux_fc.')]


def _rename_rmt_key(key: str) -> str:
    """mmevt name of one authors' key ('' for keys that have no counterpart)."""
    m = re.fullmatch(r'patch_embed\.proj\.(\d+)\.(.+)', key)
    if m:
        if m.group(1) not in _STEM:
            raise KeyError(key)
        return f'backbone.stem.{_STEM[m.group(1)]}.{m.group(2)}'
    m = re.fullmatch(r'layers\.(\d+)\.(.+)', key)
    if m:
        stage, rest = int(m.group(1)), m.group(2)
        if rest.startswith('Relpos.'):  # decay rates / rotary angles: recomputed, not stored
            return ''
        if rest.startswith('downsample.'):
            rest = rest.replace('downsample.reduction.', 'downsample.conv.')
            return f'backbone.stages.{stage + 1}.{rest}'
        m2 = re.fullmatch(r'blocks\.(\d+)\.(.+)', rest)
        if m2:
            block, tail = m2.groups()
            prefix = f'backbone.stages.{stage}.blocks.{block}.'
            if tail in ('gamma_1', 'gamma_2'):
                return prefix + f'ls{tail[-1]}.gamma'
            for old, new in _BLOCK:
                if tail.startswith(old):
                    return prefix + new + tail[len(old):]
        raise KeyError(key)
    for old, new in _HEAD:
        if key.startswith(old):
            return new + key[len(old):]
    raise KeyError(key)


def _is_backbone_key(key: str) -> bool:
    """Whether an authors' key (without ``backbone.``) is part of their backbone."""
    try:
        new = _rename_rmt_key(key)
    except KeyError:
        return False
    return new == '' or new.startswith('backbone.')


def convert_rmt(state_dict: Mapping[str, Tensor], backbone_only: bool = False
                ) -> 'OrderedDict[str, Tensor]':
    """Convert an authors' RMT classifier state dict to mmevt keys.

    Args:
        state_dict (Mapping): the authors' keys (``patch_embed.*``, ``layers.*``, ``proj``,
            ``norm``, ``head`` and, token-labelled, ``aux_head``).
        backbone_only (bool): drop the classifier and the ``backbone.`` prefix (for
            ``init_cfg=dict(type='Pretrained', checkpoint=...)`` without ``prefix``).
            Defaults to False: an mmpretrain ``ImageClassifier`` state dict
            (``backbone.*``, ``neck.*``, ``head.fc.*`` and ``head.aux_fc.*``).

    Returns:
        OrderedDict: converted state dict (``Relpos`` buffers left out).

    Raises:
        ValueError: keys outside the authors' layout, listed.
    """
    out = OrderedDict()
    unknown = []
    for key, value in state_dict.items():
        try:
            new = _rename_rmt_key(key)
        except KeyError:
            unknown.append(key)
            continue
        if not new:
            continue
        if new.endswith(('ls1.gamma', 'ls2.gamma')):
            value = value.reshape(-1)  # authors' (1, 1, 1, C) -> ours (C, )
        if backbone_only:
            if not new.startswith('backbone.'):
                continue
            new = new[len('backbone.'):]
        out[new] = value
    if unknown:
        raise ValueError(f'{len(unknown)} keys are not in the authors\' RMT layout: '
                         f'{unknown}; is this an RMT classification checkpoint?')
    return out


def convert_rmt_dense(state_dict: Mapping[str, Tensor],
                      out_indices: Optional[Tuple[int, ...]] = None,
                      backbone_only: bool = False
                      ) -> Tuple['OrderedDict[str, Tensor]', List[str]]:
    """Convert an authors' mmdet 2.x / mmseg 0.x RMT detector or segmentor state dict.

    The backbone is renamed as in :func:`convert_rmt` under ``backbone.``;
    ``backbone.extra_norms.i`` (the norm on stage ``i``'s output) becomes
    ``backbone.norm{i}``; the ``Relpos`` buffers are dropped; every other key (neck, heads)
    keeps its name, which mmdet 3.x / mmseg 1.x share with mmdet 2.x / mmseg 0.x.

    Args:
        state_dict (Mapping): the authors' keys.
        out_indices (tuple[int], optional): the stages our backbone returns. The norm of a
            stage outside them is dropped, with a note: the authors' RetinaNet normalises
            all four outputs but its FPN (``start_level=1``) never reads stage 0's, while
            ours is built with ``out_indices=(1, 2, 3)``. Defaults to None (keep all).
        backbone_only (bool): keep only the backbone, without the ``backbone.`` prefix.
            Defaults to False.

    Returns:
        tuple: the converted state dict and a list of notes on what was dropped and why.

    Raises:
        ValueError: backbone keys outside the authors' layout, listed.
    """
    out, notes, backbone = OrderedDict(), [], {}
    dropped_norms, other = [], 0
    for key, value in state_dict.items():
        if not key.startswith('backbone.'):
            if not backbone_only:
                out[key] = value
            other += 1
            continue
        m = re.fullmatch(r'backbone\.extra_norms\.(\d+)\.(weight|bias)', key)
        if m:
            i = int(m.group(1))
            if out_indices is not None and i not in out_indices:
                dropped_norms.append(key)
                continue
            backbone[f'backbone.norm{i}.{m.group(2)}'] = value
            continue
        backbone[key[len('backbone.'):]] = value
    plain = {k: v for k, v in backbone.items() if not k.startswith('backbone.norm')}
    unknown = ['backbone.' + k for k in plain if not _is_backbone_key(k)]
    if unknown:
        raise ValueError(f"{len(unknown)} backbone keys are not in the authors' RMT layout, "
                         f'{unknown}; is this an RMT detection / segmentation '
                         f'checkpoint?')
    converted = convert_rmt(plain)
    converted.update({k: v for k, v in backbone.items() if k.startswith('backbone.norm')})
    for k, v in converted.items():
        out[k[len('backbone.'):] if backbone_only else k] = v
    if dropped_norms:
        notes.append(f'dropped {sorted(set(k.rsplit(".", 1)[0] for k in dropped_norms))}: '
                     f'stage(s) outside this model\'s backbone out_indices {tuple(out_indices)}. '
                     f'The authors\' backbone normalises every stage output, but their '
                     f'RetinaNet FPN (start_level=1) never reads stage 0; ours gives the FPN '
                     f'only stages 1-3 (start_level=0), the same computation.')
    if backbone_only and other:
        notes.append(f'left out {other} neck / head tensors (--backbone-only)')
    return out, notes


def convert_to_rmt(state_dict: Mapping[str, Tensor]) -> 'OrderedDict[str, Tensor]':
    """Inverse of :func:`convert_rmt` (classifier layout, ``backbone.*`` keys).

    The authors' ``Relpos`` buffers are not produced: they are recomputed from the arch.
    """
    inverse = {}
    stem_inv = {v: k for k, v in _STEM.items()}
    out = OrderedDict()
    for key, value in state_dict.items():
        m = re.fullmatch(r'backbone\.stem\.(\d\.(?:conv|norm))\.(.+)', key)
        if m:
            out[f'patch_embed.proj.{stem_inv[m.group(1)]}.{m.group(2)}'] = value
            continue
        m = re.fullmatch(r'backbone\.stages\.(\d+)\.downsample\.(conv|norm)\.(.+)', key)
        if m:
            part = 'reduction' if m.group(2) == 'conv' else 'norm'
            out[f'layers.{int(m.group(1)) - 1}.downsample.{part}.{m.group(3)}'] = value
            continue
        m = re.fullmatch(r'backbone\.stages\.(\d+)\.blocks\.(\d+)\.(.+)', key)
        if m:
            stage, block, tail = m.groups()
            prefix = f'layers.{stage}.blocks.{block}.'
            if tail in ('ls1.gamma', 'ls2.gamma'):
                out[prefix + f'gamma_{tail[2]}'] = value.reshape(1, 1, 1, -1)
                continue
            for old, new in _BLOCK:
                if tail.startswith(new):
                    out[prefix + old + tail[len(new):]] = value
                    break
            else:
                inverse[key] = value
            continue
        for old, new in _HEAD:
            if key.startswith(new):
                out[old + key[len(new):]] = value
                break
        else:
            inverse[key] = value
    if inverse:
        raise ValueError(f'keys with no RMT counterpart: {sorted(inverse)[:5]}')
    return out

