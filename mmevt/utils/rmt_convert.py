"""Key mapping between the authors' public RMT checkpoints and mmevt's ``EVT`` layout."""
import re
from collections import OrderedDict
from typing import Dict, Mapping

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
_HEAD = [('proj.', 'neck.proj.'), ('norm.', 'neck.norm.'), ('head.', 'head.fc.')]


def unwrap_state_dict(ckpt: Mapping) -> Dict[str, Tensor]:
    """The state dict inside a checkpoint: bare, ``{'model': ...}`` or ``{'state_dict': ...}``."""
    for key in ('model', 'state_dict'):
        if key in ckpt and isinstance(ckpt[key], Mapping):
            return dict(ckpt[key])
    return dict(ckpt)


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


def convert_rmt(state_dict: Mapping[str, Tensor], backbone_only: bool = False
                ) -> 'OrderedDict[str, Tensor]':
    """Convert an authors' RMT state dict to mmevt keys.

    Args:
        state_dict (Mapping): the authors' keys (``patch_embed.*``, ``layers.*``, ``proj``,
            ``norm``, ``head``).
        backbone_only (bool): drop the classifier and the ``backbone.`` prefix (for
            ``init_cfg=dict(type='Pretrained', checkpoint=...)`` without ``prefix``).
            Defaults to False: an mmpretrain ``ImageClassifier`` state dict
            (``backbone.*``, ``neck.*``, ``head.fc.*``).

    Returns:
        OrderedDict: converted state dict.
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
            value = value.reshape(-1)
        if backbone_only:
            if not new.startswith('backbone.'):
                continue
            new = new[len('backbone.'):]
        out[new] = value
    if unknown:
        raise ValueError(f'{len(unknown)} keys are not in the authors\' RMT layout, e.g. '
                         f'{unknown[:5]}; is this an RMT classification checkpoint?')
    return out


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
