"""Token grouping: the grouped layouts of a stage grid, group / ungroup and their padding.

Each layout (the ``mode`` of an attention layer: which tokens meet) is one
:class:`Layout` record in :data:`LAYOUTS`; the mode lists and the single-layout token mixers
(:data:`mmevt.models.layers.MIXERS`) are derived from it:

- ``full``: one group holding all ``N = H * W`` tokens;
- ``group`` (EuSA-g): consecutive tokens of the row-major sequence, slot (g, i) holds token
  ``g * S + i``;
- ``dilate`` (EuSA-d): token t is in group ``t mod G``, slot (g, i) holds token ``i * G + g``;
- ``window``: non-overlapping ``s x s`` 2D windows (Swin's W-MSA partition);
- ``grid``: window (a, b) holds rows ``a, a + Gh, ...`` and columns ``b, b + Gw, ...`` (the 2D
  counterpart of ``dilate``, MaxViT's grid attention).

The 1D modes hold a fixed number of tokens ``S = group_size`` whatever the image size; the 2D
modes (``group_size = s * s``) exist for the "2D windows vs 1D groups" ablation. Every layout
is one (optional roll,) pad plus one ``rearrange`` (no gathers: cheap and ``torch.compile``
friendly), and the index table :func:`group_token_index` is that same layout applied to the
token indices, so the two cannot disagree.
"""
import math
from typing import Dict, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor

from .checks import check_choice


class Layout(NamedTuple):
    """How one grouping mode puts the tokens of a stage grid into groups.

    Attributes:
        pattern (str | None): einops pattern from the (padded) sequence ``(B, N, ...)``, or
            for 2D layouts the padded grid ``(B, H, W, ...)``, to the groups
            ``(B, G, S, ...)``; axes ``g, s`` (1D) or ``gh, gw, s1, s2`` (2D). None: one
            group of all tokens.
        grid (bool): a 2D partition into ``s x s`` windows, so ``group_size`` must be a
            square (the square-group rule). Defaults to False.
        shift (bool): roll the tokens by half a group (half a window per side in 2D) before
            grouping, like Swin's shifted windows. Defaults to False.
        mixer (bool): also a token mixer of its own name in ``MIXERS``. Defaults to True.
    """
    pattern: Optional[str]
    grid: bool = False
    shift: bool = False
    mixer: bool = True


LAYOUTS: Dict[str, Layout] = {
    'full': Layout(None),
    'group': Layout('b (g s) ... -> b g s ...'),
    'dilate': Layout('b (s g) ... -> b g s ...'),
    'window': Layout('b (gh s1) (gw s2) ... -> b (gh gw) (s1 s2) ...', grid=True),
    'grid': Layout('b (s1 gh) (s2 gw) ... -> b (gh gw) (s1 s2) ...', grid=True),
}
# derived, for checks and messages (read LAYOUTS itself where a new record must count)
GROUP_MODES = tuple(LAYOUTS)
WINDOW_MODES = tuple(m for m, lay in LAYOUTS.items() if lay.grid)


def layout(mode: str) -> Layout:
    """The :class:`Layout` of ``mode``; a ``ValueError`` names the known modes."""
    return LAYOUTS[check_choice('mode', mode, tuple(LAYOUTS))]


def _ungroup_pattern(lay: Layout) -> str:
    return ' -> '.join(lay.pattern.split(' -> ')[::-1])


def num_groups(num_tokens: int, group_size: int) -> int:
    """Number of groups ``G = ceil(N / group_size)`` (also windows per side in 2D).

    Written ``(N + S - 1) // S``, not ``-(-N // S)``: the TorchScript ONNX exporter traces a
    shape's ``//`` as ONNX ``Div``, which truncates, so the negated form would floor.
    """
    return (num_tokens + group_size - 1) // group_size


def square_side(n: int) -> Optional[int]:
    """``s`` if ``n == s * s``, else None."""
    side = math.isqrt(n)
    return side if side * side == n else None


def window_side(group_size: int, mode: str) -> int:
    """Side of the square 2D window holding ``group_size`` tokens (``'window'``/``'grid'``).

    The 2D modes keep the 1D modes' meaning of ``group_size`` (tokens that meet), so an
    ablation swaps 1D groups of 49 for 7 x 7 windows with everything else equal.
    """
    side = square_side(group_size)
    if side is None:
        raise ValueError(f'mode {mode!r} needs a square group_size (tokens per 2D window, '
                         f'e.g. 49 = 7x7 or 64 = 8x8), got {group_size}')
    return side


def _window_grid(hw: Optional[Tuple[int, int]], group_size: int,
                 mode: str) -> Tuple[int, int, int]:
    """``(s, Gh, Gw)``: window side and windows per column / row of the padded grid."""
    if hw is None:
        raise ValueError(f'mode {mode!r} groups a 2D grid: pass hw=(H, W)')
    s = window_side(group_size, mode)
    return s, num_groups(hw[0], s), num_groups(hw[1], s)


def has_padding(hw: Tuple[int, int], group_size: int, mode: str) -> bool:
    """Whether the grouped layout of an ``H x W`` grid has padded slots (plain ints, so it
    costs nothing and never breaks a ``torch.compile`` graph)."""
    h, w = hw
    lay = layout(mode)
    if lay.pattern is None:
        return False
    if lay.grid:
        s = window_side(group_size, mode)
        return h % s != 0 or w % s != 0
    return (h * w) % group_size != 0


def _pad_tokens(x: Tensor, idx: Tensor, valid: Tensor, pad_value: float) -> Tensor:
    """``x`` padded along dim 1 by gathering: slot ``i`` takes token ``idx[i]`` where
    ``valid[i]`` is 1, else ``pad_value`` (``valid``: ones padded with zeros). What
    :func:`group_tokens` does under ``torch.compile`` (eager calls and exports pad, and
    only where a grid does not fill its groups: no copy otherwise).

    A gather rather than ``F.pad``: the gradient of a pad is a slice of the padded
    gradient, contiguous or not depending on the padding, and the reshapes that take it
    back to the layers before made ``torch.compile``'s backward guard on that, tracing
    again for sizes on the other side; a gather's gradient is a fresh tensor.
    ``idx`` and ``valid`` come from padding ``arange`` / ``ones`` (tensors without
    gradients), which traces once for all sizes.
    """
    valid = valid.view((1, -1) + (1, ) * (x.dim() - 2)).to(x.dtype)
    out = x.index_select(1, idx) * valid
    if pad_value != 0:
        out = out + (1 - valid) * pad_value
    return out


def group_tokens(x: Tensor, group_size: int, mode: str,
                 hw: Optional[Tuple[int, int]] = None, pad_value: float = 0.) -> Tensor:
    """Split a token sequence into groups.

    Args:
        x (Tensor): shape ``(B, N, ...)``, row-major over the grid.
        group_size (int): tokens per group ``S`` (a square for the 2D modes).
        mode (str): a name in :data:`LAYOUTS` (see the module docstring).
        hw (tuple[int, int], optional): the grid ``(H, W)``; needed by the 2D modes.
            Defaults to None.
        pad_value (float): value of the padded slots. Defaults to 0.

    Returns:
        Tensor: shape ``(B, G, S, ...)`` (``(B, 1, N, ...)`` for ``full``).
    """
    lay = layout(mode)
    if lay.pattern is None:
        return x[:, None]
    tail = x.shape[2:]
    if lay.grid:
        s, gh, gw = _window_grid(hw, group_size, mode)
        h, w = hw
        x = x.reshape(x.shape[0], h, w, -1)
        if lay.shift:
            x = x.roll((-(s // 2), -(s // 2)), dims=(1, 2))
        if torch.compiler.is_compiling():
            pad = (0, gw * s - w, 0, gh * s - h)
            idx = F.pad(torch.arange(h * w, device=x.device).view(h, w), pad).flatten()
            valid = F.pad(x.new_ones(h, w), pad).flatten()
            x = _pad_tokens(x.reshape(x.shape[0], h * w, -1), idx, valid, pad_value)
            x = rearrange(x, 'b (h w) c -> b h w c', h=gh * s)
        else:
            x = F.pad(x, (0, 0, 0, gw * s - w, 0, gh * s - h), value=pad_value)
        x = rearrange(x, lay.pattern, s1=s, s2=s)
    else:
        n = x.shape[1]
        g = num_groups(n, group_size)
        x = x.reshape(x.shape[0], n, -1)
        if lay.shift:
            x = x.roll(-(group_size // 2), dims=1)
        if torch.compiler.is_compiling():
            # padded even by 0 slots: a branch on ``g * S != N`` would make torch.compile
            # guard on it and trace again for every size on the other side of it
            pad = (0, g * group_size - n)
            idx = F.pad(torch.arange(n, device=x.device), pad)
            x = _pad_tokens(x, idx, F.pad(x.new_ones(n), pad), pad_value)
        elif g * group_size != n:
            x = F.pad(x, (0, 0, 0, g * group_size - n), value=pad_value)
        x = rearrange(x, lay.pattern, g=g)
    return x.reshape(*x.shape[:3], *tail)


def ungroup_tokens(x: Tensor, num_tokens: int, mode: str,
                   hw: Optional[Tuple[int, int]] = None) -> Tensor:
    """Inverse of :func:`group_tokens`; padded slots are dropped.

    Args:
        x (Tensor): shape ``(B, G, S, ...)``.
        num_tokens (int): the original sequence length N.
        mode (str): the mode used to group.
        hw (tuple[int, int], optional): the grid ``(H, W)``; needed by the 2D modes.
            Defaults to None.

    Returns:
        Tensor: shape ``(B, N, ...)``.
    """
    lay = layout(mode)
    b, g, s2 = x.shape[:3]
    if lay.pattern is None:
        return x[:, 0]
    if lay.grid:
        s, gh, gw = _window_grid(hw, s2, mode)
        h, w = hw
        x = rearrange(x, _ungroup_pattern(lay), gh=gh, gw=gw, s1=s, s2=s)
        if torch.compiler.is_compiling():
            # the tokens' slots of the padded grid gathered, not sliced (_pad_tokens: a
            # slice's contiguity depends on the padding)
            idx = (torch.arange(h, device=x.device)[:, None] * (gw * s)
                   + torch.arange(w, device=x.device)[None, :]).flatten()
            x = x.reshape(b, gh * s * gw * s, *x.shape[3:]).index_select(1, idx)
            x = x.reshape(b, h, w, *x.shape[2:])
        else:
            x = x[:, :h, :w]
        if lay.shift:
            x = x.roll((s // 2, s // 2), dims=(1, 2))
        return x.reshape(b, num_tokens, *x.shape[3:])
    x = rearrange(x, _ungroup_pattern(lay))
    if torch.compiler.is_compiling():  # gathered, not sliced: as above
        x = x.index_select(1, torch.arange(num_tokens, device=x.device))
    else:
        x = x[:, :num_tokens]
    return x.roll(s2 // 2, dims=1) if lay.shift else x


def ungroup_pairs(x: Tensor, hw: Tuple[int, int], group_size: int, mode: str) -> Tensor:
    """Values per pair of slots of each group, put at their pair of tokens (e.g. attention
    probabilities, for pictures); pairs that share no group and padded slots get 0.

    Args:
        x (Tensor): shape ``(..., G, S, S)``: query slot, key slot.
        hw (tuple[int, int]): the grid ``(H, W)``.
        group_size (int): tokens per group, as for :func:`group_tokens`.
        mode (str): the mode used to group.

    Returns:
        Tensor: shape ``(..., N, N)``: query token, key token.
    """
    n = hw[0] * hw[1]
    idx = group_token_index(hw, group_size, mode, x.device)  # (G, S); padded slots hold N
    # one flat index per slot pair into an (N + 1) x (N + 1) table whose last row / column
    # collects the padded slots and is cut off
    pair = (idx[:, :, None] * (n + 1) + idx[:, None, :]).reshape(-1)
    lead = x.shape[:-3]
    out = x.new_zeros(*lead, (n + 1) * (n + 1))
    out[..., pair] = x.reshape(*lead, -1)
    return out.view(*lead, n + 1, n + 1)[..., :n, :n]


def group_token_index(hw: Tuple[int, int], group_size: int, mode: str, device=None) -> Tensor:
    """Sequence index of every slot of the grouped layout of an ``H x W`` grid.

    The layout of :func:`group_tokens` applied to the indices ``0 .. N - 1``; padded slots
    hold ``N``.

    Returns:
        Tensor: long, shape ``(G, group_size)`` (``(1, N)`` for ``full``).
    """
    n = hw[0] * hw[1]
    idx = torch.arange(n, device=device)[None, :, None]
    return group_tokens(idx, group_size, mode, hw, pad_value=n)[0, ..., 0]


__all__ = ['LAYOUTS', 'Layout', 'layout', 'GROUP_MODES', 'WINDOW_MODES', 'num_groups',
           'square_side', 'window_side',
           'has_padding', 'group_tokens', 'ungroup_tokens', 'ungroup_pairs', 'group_token_index']
