"""Normalisation layers built from OpenMMLab-style ``norm_cfg`` dicts, with torch only.

mmcv's ``build_norm_layer`` is not used so the model runs where mmcv's ops are missing.
"""
from typing import Optional

from torch import nn

_NORMS = {
    'BN': nn.BatchNorm2d,
    'BN2d': nn.BatchNorm2d,
    'SyncBN': nn.SyncBatchNorm,
    'GN': nn.GroupNorm,
    'LN': nn.LayerNorm,
}


def build_norm(cfg: Optional[dict], num_features: int) -> nn.Module:
    """Build a norm layer from ``cfg`` (``type`` in BN, BN2d, SyncBN, GN, LN).

    ``None`` gives ``nn.Identity``. ``LN`` normalises the last (channel) dimension;
    ``GN`` needs ``num_groups``. Extra keys go to the layer (``eps``, ``momentum``...);
    ``requires_grad=False`` freezes its parameters.
    """
    if cfg is None:
        return nn.Identity()
    if not isinstance(cfg, dict) or 'type' not in cfg:
        raise ValueError(f"norm_cfg must be a dict with a 'type' key, got {cfg!r}")
    cfg = dict(cfg)
    norm_type = cfg.pop('type')
    if norm_type not in _NORMS:
        raise ValueError(f'norm_cfg type must be one of {sorted(_NORMS)}, got {norm_type!r}')
    requires_grad = cfg.pop('requires_grad', True)
    if norm_type == 'GN':
        layer = nn.GroupNorm(num_channels=num_features, **cfg)
    else:
        layer = _NORMS[norm_type](num_features, **cfg)
    for p in layer.parameters():
        p.requires_grad = requires_grad
    return layer
