"""RMT's rotary position shift over the row-major flattened token index."""
from typing import Tuple

import torch
from einops import repeat
from torch import Tensor


def rotary_sin_cos(hw: Tuple[int, int], head_dim: int, device=None) -> Tuple[Tensor, Tensor]:
    """Sines and cosines of the rotary shift for an ``H x W`` grid.

    Angles are ``1 / 10000 ** linspace(0, 1, D / 2)``, each repeated twice, times the
    flattened token index (as in the authors' RMT).

    Returns:
        tuple[Tensor, Tensor]: ``sin`` and ``cos``, each of shape ``(N, 1, D)``, float32.
    """
    angle = 1.0 / (10000 ** torch.linspace(0, 1, head_dim // 2, device=device))
    angle = repeat(angle, 'd -> (d pair)', pair=2)
    index = torch.arange(hw[0] * hw[1], device=device, dtype=torch.float32)
    phase = index[:, None] * angle[None, :]
    return phase.sin()[:, None], phase.cos()[:, None]


def apply_rotary(x: Tensor, sin: Tensor, cos: Tensor) -> Tensor:
    """Rotate feature pairs: ``(x0, x1) -> (x0 cos - x1 sin, x1 cos + x0 sin)``.

    Args:
        x (Tensor): shape ``(B, N, heads, D)``.
        sin, cos (Tensor): shape ``(N, 1, D)``.

    Returns:
        Tensor: same shape and dtype as ``x``.
    """
    rotated = torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)
    return (x * cos + rotated * sin).to(x.dtype)
