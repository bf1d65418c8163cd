"""Spatial decay: the explicit spatial prior of EVT (Euclidean) and RMT (Manhattan).

The decay enters the attention logits as ``log(gamma_h) * dist(p_i, p_j)``, where ``p`` are
the tokens' (row, col) coordinates on the stage grid. Everything here is a pure function of
the grid, so nothing needs interpolating when the input size changes and nothing is stored
in checkpoints.
"""
import math
from collections import OrderedDict
from typing import Callable, Optional, Tuple, TypeVar

import torch
from torch import Tensor

T = TypeVar('T')
DECAY_KINDS = ('euclidean', 'manhattan', 'none')
GROUP_MODES = ('full', 'group', 'dilate', 'window', 'grid')
WINDOW_MODES = ('window', 'grid')  # 2D partitions, for the "2D windows vs 1D groups" ablation


def check_choice(name: str, value: str, allowed: Tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise a ``ValueError`` naming both."""
    if value not in allowed:
        raise ValueError(f'{name} must be one of {list(allowed)}, got {value!r}')
    return value


def check_heads(embed_dims: int, num_heads: int) -> int:
    """Return the head dim, or raise a ``ValueError`` if ``num_heads`` does not divide C."""
    if num_heads <= 0 or embed_dims % num_heads:
        raise ValueError(f'num_heads ({num_heads}) must be positive and divide '
                         f'embed_dims ({embed_dims})')
    return embed_dims // num_heads


def line_decay_bias(length: int, log_gamma: Tensor) -> Tensor:
    """1D decay ``log_gamma[h] * |i - j|`` along one axis (RMT's decomposed MaSA).

    Returns:
        Tensor: float32, shape ``(heads, L, L)``, on ``log_gamma``'s device.
    """
    pos = torch.arange(length, device=log_gamma.device, dtype=torch.float32)[:, None]
    return log_gamma.float()[:, None, None] * pairwise_distance(pos, pos, 'manhattan')[None]


def decay_log_rates(num_heads: int, init_value: float, heads_range: float) -> Tensor:
    """Per-head ``log(gamma_h)``.

    ``log(gamma_h) = log(1 - 2 ** (-init_value - heads_range * h / num_heads))``.

    Returns:
        Tensor: shape ``(num_heads,)``, float32, all negative.
    """
    h = torch.arange(num_heads, dtype=torch.float32)
    return torch.log(1 - 2 ** (-init_value - heads_range * h / num_heads))


def grid_coords(hw: Tuple[int, int], device=None) -> Tensor:
    """Row-major (row, col) coordinates of an ``H x W`` grid.

    Returns:
        Tensor: shape ``(H * W, 2)``, float32.
    """
    h, w = hw
    rows = torch.arange(h, device=device, dtype=torch.float32)
    cols = torch.arange(w, device=device, dtype=torch.float32)
    return torch.stack(torch.meshgrid(rows, cols, indexing='ij'), dim=-1).reshape(h * w, 2)


def pairwise_distance(pq: Tensor, pk: Tensor, kind: str) -> Tensor:
    """Distance between query and key coordinates.

    Args:
        pq (Tensor): query coordinates, shape ``(..., Nq, 2)``.
        pk (Tensor): key coordinates, shape ``(..., Nk, 2)``.
        kind (str): ``'euclidean'``, ``'manhattan'`` or ``'none'`` (all zeros).

    Returns:
        Tensor: shape ``(..., Nq, Nk)``.
    """
    check_choice('decay', kind, DECAY_KINDS)
    diff = pq[..., :, None, :] - pk[..., None, :, :]
    if kind == 'euclidean':
        return diff.pow(2).sum(-1).sqrt()
    if kind == 'manhattan':
        return diff.abs().sum(-1)
    return diff.new_zeros(diff.shape[:-1])


def num_groups(num_tokens: int, group_size: int) -> int:
    """Number of 1D groups ``G = ceil(N / group_size)``."""
    return -(-num_tokens // group_size)


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


def has_padding(hw: Tuple[int, int], group_size: int, mode: str) -> bool:
    """Whether the grouped layout of an ``H x W`` grid has padded slots (plain ints, so it
    costs nothing and never breaks a ``torch.compile`` graph)."""
    h, w = hw
    if mode == 'full':
        return False
    if mode in WINDOW_MODES:
        s = window_side(group_size, mode)
        return h % s != 0 or w % s != 0
    return (h * w) % group_size != 0


def group_token_index(hw: Tuple[int, int], group_size: int, mode: str, device=None) -> Tensor:
    """Sequence index of every slot of the grouped layout of an ``H x W`` grid.

    1D modes work on the row-major sequence of ``N = H * W`` tokens:
    ``group``: slot (g, i) holds token ``g * group_size + i`` (consecutive groups);
    ``dilate``: slot (g, i) holds token ``i * G + g`` (token t is in group ``t mod G``);
    ``full``: a single group holding all tokens.
    2D modes pad the grid to multiples of the window side ``s`` (``group_size = s * s``):
    ``window``: non-overlapping ``s x s`` windows (Swin's W-MSA partition);
    ``grid``: window (a, b) holds the tokens at rows ``a, a + Gh, ...`` and columns
    ``b, b + Gw, ...`` (the 2D counterpart of ``dilate``, MaxViT's grid attention).
    Slots whose index is ``>= N`` are padding.

    Returns:
        Tensor: long, shape ``(G, group_size)`` (``(1, N)`` for ``full``).
    """
    check_choice('mode', mode, GROUP_MODES)
    h, w = hw
    n = h * w
    if mode == 'full':
        return torch.arange(n, device=device)[None]
    if mode in WINDOW_MODES:
        s = window_side(group_size, mode)
        gh, gw = num_groups(h, s), num_groups(w, s)
        rows = torch.arange(gh * s, device=device)[:, None]
        cols = torch.arange(gw * s, device=device)[None, :]
        idx = torch.where((rows < h) & (cols < w), rows * w + cols, n)  # padded grid
        if mode == 'window':
            return idx.view(gh, s, gw, s).permute(0, 2, 1, 3).reshape(gh * gw, s * s)
        return idx.view(s, gh, s, gw).permute(1, 3, 0, 2).reshape(gh * gw, s * s)
    g = num_groups(n, group_size)
    idx = torch.arange(g * group_size, device=device)
    if mode == 'group':
        return idx.view(g, group_size)
    return idx.view(group_size, g).t()


def grouped_distance(hw: Tuple[int, int], group_size: int, mode: str,
                     kind: str, device=None) -> Tensor:
    """Distances between the true 2D positions of the tokens that share a group.

    Padded keys get ``+inf`` so that ``log(gamma) * dist`` is ``-inf`` (zero weight); every
    group keeps at least one real key, so no row of logits is all ``-inf``.

    Returns:
        Tensor: float32, shape ``(G, S, S)`` with ``S = group_size`` (``(1, N, N)`` for
        ``full``).
    """
    n = hw[0] * hw[1]
    idx = group_token_index(hw, group_size, mode, device)
    coords = grid_coords(hw, device)
    pad = idx >= n
    pos = coords[idx.clamp(max=n - 1)]
    dist = pairwise_distance(pos, pos, kind)
    return dist.masked_fill(pad[:, None, :], float('inf'))


class DecayBiasCache:
    """Memo of per-grid attention inputs: additive decay biases, Flex block masks.

    One instance lives in each stage: all blocks of a stage share the decay rates and the
    grid, so a bias (or mask) is built once per input size instead of once per block. Only
    ``max_entries`` entries are kept (multi-scale training sees many sizes).
    """

    _MISSING = object()

    def __init__(self, max_entries: int = 8):
        self.max_entries = max_entries
        self._store: 'OrderedDict[tuple, object]' = OrderedDict()

    def memo(self, key: tuple, build: Callable[[], T]) -> T:
        """``build()``'s result, computed once per ``key`` (None results are kept too)."""
        value = self._store.get(key, self._MISSING)
        if value is self._MISSING:
            value = self._store[key] = build()
            while len(self._store) > self.max_entries:
                self._store.popitem(last=False)
        else:
            self._store.move_to_end(key)
        return value

    def get(self, log_gamma: Tensor, hw: Tuple[int, int], group_size: int, mode: str,
            kind: str, dtype: torch.dtype) -> Tensor:
        """Additive bias ``log_gamma[h] * dist``.

        Returns:
            Tensor: shape ``(heads * G, S, S)``, head-major (index ``h * G + g``).
        """
        key = ('bias', tuple(hw), group_size, mode, kind, log_gamma.device, dtype)
        return self.memo(key, lambda: decay_bias(
            log_gamma, grouped_distance(hw, group_size, mode, kind,
                                        log_gamma.device)).to(dtype))

    def clear(self) -> None:
        self._store.clear()


def decay_bias(log_gamma: Tensor, dist: Tensor) -> Tensor:
    """``log_gamma[h] * dist[g]`` laid out head-major as ``(heads * G, S, S)``.

    ``0 * inf`` would be NaN for a zero rate (``decay='none'`` uses zero distances, never
    zero rates), so padded keys are written as ``-inf`` explicitly.
    """
    heads = log_gamma.numel()
    pad = torch.isinf(dist)
    bias = log_gamma.float()[:, None, None, None] * dist.masked_fill(pad, 0)[None]
    bias = bias.masked_fill(pad[None], float('-inf'))
    return bias.reshape(heads * dist.shape[0], *dist.shape[1:])


__all__ = [
    'DECAY_KINDS', 'GROUP_MODES', 'WINDOW_MODES', 'check_choice', 'check_heads',
    'line_decay_bias', 'decay_log_rates', 'grid_coords', 'pairwise_distance', 'num_groups',
    'square_side', 'window_side', 'has_padding', 'group_token_index', 'grouped_distance',
    'DecayBiasCache', 'decay_bias'
]
