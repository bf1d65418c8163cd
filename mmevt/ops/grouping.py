"""Token grouping: 1D groups (EuSA-g), 1D dilated groups (EuSA-d), 2D windows and 2D grids,
and their exact inverses.

The 1D modes work on the row-major token sequence of a stage, so a group holds a fixed number
of tokens whatever the image size; the 2D modes (``window``, ``grid``) exist for the "2D
windows vs 1D groups" ablation. Layouts are produced with pad + view/permute only (no
gathers), which keeps them cheap and ``torch.compile`` friendly; they match
:func:`~mmevt.ops.decay.group_token_index` slot for slot.
"""
from typing import Optional, Tuple

import torch.nn.functional as F
from torch import Tensor

from .decay import GROUP_MODES, WINDOW_MODES, check_choice, num_groups, window_side


def _window_grid(hw: Optional[Tuple[int, int]], group_size: int, mode: str):
    if hw is None:
        raise ValueError(f'mode {mode!r} groups a 2D grid: pass hw=(H, W)')
    s = window_side(group_size, mode)
    return s, num_groups(hw[0], s), num_groups(hw[1], s)


def group_tokens(x: Tensor, group_size: int, mode: str,
                 hw: Optional[Tuple[int, int]] = None) -> Tensor:
    """Split a token sequence into groups.

    Args:
        x (Tensor): shape ``(B, N, C)``, row-major over the grid.
        group_size (int): tokens per group ``S`` (a square for the 2D modes).
        mode (str): ``'group'`` (consecutive tokens), ``'dilate'`` (token t in group
            ``t mod G``), ``'window'`` (``s x s`` windows), ``'grid'`` (strided 2D windows)
            or ``'full'`` (one group of all N tokens).
        hw (tuple[int, int], optional): the grid ``(H, W)``; needed by the 2D modes.
            Defaults to None.

    Returns:
        Tensor: shape ``(B, G, S, C)``, zero-padded (``(B, 1, N, C)`` for ``full``).
    """
    check_choice('mode', mode, GROUP_MODES)
    b, n, c = x.shape
    if mode == 'full':
        return x[:, None]
    if mode in WINDOW_MODES:
        s, gh, gw = _window_grid(hw, group_size, mode)
        h, w = hw
        x = F.pad(x.view(b, h, w, c), (0, 0, 0, gw * s - w, 0, gh * s - h))
        if mode == 'window':
            x = x.view(b, gh, s, gw, s, c).permute(0, 1, 3, 2, 4, 5)
        else:
            x = x.view(b, s, gh, s, gw, c).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(b, gh * gw, s * s, c)
    g = num_groups(n, group_size)
    if g * group_size != n:
        x = F.pad(x, (0, 0, 0, g * group_size - n))
    if mode == 'group':
        return x.view(b, g, group_size, c)
    return x.view(b, group_size, g, c).transpose(1, 2)


def ungroup_tokens(x: Tensor, num_tokens: int, mode: str,
                   hw: Optional[Tuple[int, int]] = None) -> Tensor:
    """Inverse of :func:`group_tokens`; padded slots are dropped.

    Args:
        x (Tensor): shape ``(B, G, S, C)``.
        num_tokens (int): the original sequence length N.
        mode (str): the mode used to group.
        hw (tuple[int, int], optional): the grid ``(H, W)``; needed by the 2D modes.
            Defaults to None.

    Returns:
        Tensor: shape ``(B, N, C)``.
    """
    check_choice('mode', mode, GROUP_MODES)
    b, g, s2, c = x.shape
    if mode in WINDOW_MODES:
        s, gh, gw = _window_grid(hw, s2, mode)
        h, w = hw
        if mode == 'window':
            x = x.view(b, gh, gw, s, s, c).permute(0, 1, 3, 2, 4, 5)
        else:
            x = x.view(b, gh, gw, s, s, c).permute(0, 3, 1, 4, 2, 5)
        x = x.reshape(b, gh * s, gw * s, c)[:, :h, :w]
        return x.reshape(b, num_tokens, c)
    if mode == 'dilate':
        x = x.transpose(1, 2)
    return x.reshape(b, g * s2, c)[:, :num_tokens]
