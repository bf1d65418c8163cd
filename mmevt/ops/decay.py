"""Spatial decay: the explicit spatial prior of EVT (Euclidean) and RMT (Manhattan).

The decay enters the attention logits as ``log(gamma_h) * dist(p_i, p_j)``, where ``p`` are
the tokens' (row, col) coordinates on the stage grid: per-head rates, distances, and the
additive bias of a grouped layout. Everything here is a pure function of the grid, so
nothing needs interpolating when the input size changes and nothing is stored in
checkpoints.
"""
from typing import Tuple

import torch
from einops import rearrange
from torch import Tensor

from .checks import check_choice
from .grouping import group_token_index
from .grouping import square_side  # noqa: F401  (old home, one release: visualize tool)

DECAY_KINDS = ('euclidean', 'manhattan', 'none')


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


def slot_coords(hw: Tuple[int, int], idx: Tensor) -> Tensor:
    """(row, col) of every slot of a grouped layout; padded slots (index ``N``) get (0, 0).

    The coordinates get one extra row for the padded index instead of clamping the
    indices: an int64 ``clamp`` exports as an integer ``Clip``, which ONNX opset 11 rejects.

    Args:
        hw (tuple[int, int]): the grid ``(H, W)``.
        idx (Tensor): long slot indices in ``[0, N]`` (:func:`group_token_index`).

    Returns:
        Tensor: float32, shape ``(*idx.shape, 2)``.
    """
    coords = grid_coords(hw, idx.device)
    return torch.cat([coords, coords.new_zeros(1, 2)])[idx]


def pairwise_distance(pq: Tensor, pk: Tensor, decay: str) -> Tensor:
    """Distance between query and key coordinates under ``decay``.

    Args:
        pq (Tensor): query coordinates, shape ``(..., Nq, 2)``.
        pk (Tensor): key coordinates, shape ``(..., Nk, 2)``.
        decay (str): ``'euclidean'``, ``'manhattan'`` or ``'none'`` (all zeros).

    Returns:
        Tensor: shape ``(..., Nq, Nk)``.
    """
    check_choice('decay', decay, DECAY_KINDS)
    diff = pq[..., :, None, :] - pk[..., None, :, :]
    if decay == 'euclidean':
        return diff.pow(2).sum(-1).sqrt()
    if decay == 'manhattan':
        return diff.abs().sum(-1)
    return diff.new_zeros(diff.shape[:-1])


def line_decay_bias(length: int, log_gamma: Tensor) -> Tensor:
    """1D decay ``log_gamma[h] * |i - j|`` along one axis (RMT's decomposed MaSA).

    Returns:
        Tensor: float32, shape ``(heads, L, L)``, on ``log_gamma``'s device.
    """
    pos = torch.arange(length, device=log_gamma.device, dtype=torch.float32)[:, None]
    return log_gamma.float()[:, None, None] * pairwise_distance(pos, pos, 'manhattan')[None]


def grouped_distance(hw: Tuple[int, int], group_size: int, mode: str,
                     decay: str, device=None) -> Tensor:
    """Distances between the true 2D positions of the tokens that share a group.

    Padded keys get ``+inf`` so that ``log(gamma) * dist`` is ``-inf`` (zero weight); every
    group keeps at least one real key, so no row of logits is all ``-inf``.

    Returns:
        Tensor: float32, shape ``(G, S, S)`` with ``S = group_size`` (``(1, N, N)`` for
        ``full``).
    """
    n = hw[0] * hw[1]
    idx = group_token_index(hw, group_size, mode, device)
    pos = slot_coords(hw, idx)
    dist = pairwise_distance(pos, pos, decay)
    return dist.masked_fill((idx >= n)[:, None, :], float('inf'))


def decay_bias(log_gamma: Tensor, dist: Tensor) -> Tensor:
    """``log_gamma[h] * dist[g]`` laid out head-major as ``(heads * G, S, S)``.

    ``0 * inf`` would be NaN for a zero rate (``decay='none'`` uses zero distances, never
    zero rates), so padded keys are written as ``-inf`` explicitly.
    """
    pad = torch.isinf(dist)
    bias = log_gamma.float()[:, None, None, None] * dist.masked_fill(pad, 0)[None]
    bias = bias.masked_fill(pad[None], float('-inf'))
    return rearrange(bias, 'h g q k -> (h g) q k')


__all__ = ['DECAY_KINDS', 'decay_log_rates', 'grid_coords', 'slot_coords', 'pairwise_distance',
           'line_decay_bias', 'grouped_distance', 'decay_bias']
