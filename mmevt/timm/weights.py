"""mmevt checkpoints as timm weights: :func:`checkpoint_filter_fn`, the
``pretrained_filter_fn`` of every :class:`~mmevt.timm.EVTClassifier` entrypoint."""
import logging
from typing import Any, Dict

from torch import Tensor, nn

from ..utils.checkpoint import unwrap_state_dict

_logger = logging.getLogger(__name__)


def checkpoint_filter_fn(state_dict: Dict[str, Any], model: nn.Module) -> Dict[str, Tensor]:
    """An mmevt checkpoint's weights for ``model`` (timm's ``pretrained_filter_fn``).

    Reads the toolkits' classifiers (``backbone.*``, ``neck.*``, ``head.fc.*``, as
    mmpretrain saves them and as ``tools/model_converters/rmt_to_mmevt.py`` writes the
    authors' RMT checkpoints), the ``state_dict`` of a runner checkpoint and backbone-only
    files (``stem.*``, ``stages.*``; converted with ``--backbone-only`` or a detector's
    ``backbone.*``). Tensors the model lacks are dropped, tensors the file lacks kept at
    their initial values, each with a WARNING naming them; a classifier of another class
    count is dropped the same way.

    Args:
        state_dict (dict): the loaded file (timm unwraps ``state_dict`` / ``model``).
        model (EVTClassifier): the model the weights are for.

    Returns:
        dict: one tensor per key of ``model.state_dict()``.

    Raises:
        ValueError: the authors' unconverted RMT layout, tensors of another shape (another
            arch) or no backbone tensor at all.
    """
    state = unwrap_state_dict(state_dict)
    if 'patch_embed.proj.0.weight' in state or 'backbone.patch_embed.proj.0.weight' in state:
        raise ValueError("this is one of the RMT authors' own checkpoints: convert it first "
                         '(python tools/model_converters/rmt_to_mmevt.py IN OUT, '
                         'docs/checkpoints.md) and load the converted file')
    if not any(k.startswith('backbone.') for k in state):
        state = {'backbone.' + k: v for k, v in state.items()}  # a backbone-only file
    own = model.state_dict()
    pretrained_classes = getattr(model, 'pretrained_cfg', {}).get('num_classes')
    classifier = {'head.fc.weight', 'head.fc.bias'}
    out, unexpected, dropped_head, wrong = {}, [], [], []
    for key, value in state.items():
        if key not in own:
            unexpected.append(key)
        elif value.shape == own[key].shape:
            out[key] = value
        elif key in classifier:
            dropped_head.append(f'{key} {tuple(value.shape)}')
        else:
            wrong.append(f'{key}: file {tuple(value.shape)} vs model {tuple(own[key].shape)}')
    if wrong:
        raise ValueError(f'{len(wrong)} tensors of the checkpoint have another shape than '
                         f'this model ({type(model).__name__}), e.g. {wrong[:3]}: a checkpoint '
                         'of another arch?')
    if not any(k.startswith('backbone.') for k in out):
        raise ValueError(f'none of the checkpoint\'s {len(state)} tensors is a weight of this '
                         f'model: its keys start {sorted(state)[:3]}, the model\'s '
                         f'{sorted(own)[:3]}')
    if dropped_head and model.num_classes == pretrained_classes:
        _logger.warning(
            f'the checkpoint\'s classifier {dropped_head} is not for {model.num_classes} '
            'classes: left at its initial values (to load it pass num_classes=N and '
            'pretrained_cfg_overlay=dict(file=..., num_classes=N))')
    missing = [k for k in own if k not in out and not (k in classifier and dropped_head)]
    if unexpected:
        _logger.warning(f'checkpoint tensors this model does not have, ignored: {unexpected}')
    if missing:
        _logger.warning(f'model tensors the checkpoint does not have, kept at their initial '
                        f'values: {missing}')
    return {k: out.get(k, v) for k, v in own.items()}
