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
from .grouping import group_tokens

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


def grouped_coords(hw: Tuple[int, int], group_size: int, mode: str,
                   device=None) -> Tuple[Tensor, Tensor]:
    """(row, col) of every slot of a grouped layout and which slots hold a token.

    The layout of :func:`~mmevt.ops.grouping.group_tokens` applied to the grid's
    coordinates, with a third channel that is 1 for tokens and the padding value 0 for
    padded slots (which get (0, 0), as in :func:`slot_coords`). Only constant padding
    values and the grid's own sizes enter it, so under ``torch.compile`` with dynamic
    shapes it traces once for every grid size (a pad value or an index computed from the
    token count would make the graph guard on that count and trace again per size).

    Args:
        hw (tuple[int, int]): the grid ``(H, W)``.
        group_size (int): tokens per group, as for ``group_tokens``.
        mode (str): a layout of :data:`~mmevt.ops.grouping.LAYOUTS`.
        device (torch.device, optional): where to build them. Defaults to None.

    Returns:
        tuple[Tensor, Tensor]: float32 coordinates ``(G, S, 2)`` and a bool mask
        ``(G, S)`` of the slots that hold a token (``(1, N, ...)`` for ``full``).
    """
    coords = grid_coords(hw, device)
    table = torch.cat([coords, coords.new_ones(coords.shape[0], 1)], dim=1)
    grouped = group_tokens(table[None], group_size, mode, hw, pad_value=0.)[0]
    return grouped[..., :2], grouped[..., 2] > 0


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
    pos, valid = grouped_coords(hw, group_size, mode, device)
    dist = pairwise_distance(pos, pos, decay)
    return dist.masked_fill(~valid[:, None, :], float('inf'))


def decay_bias(log_gamma: Tensor, dist: Tensor) -> Tensor:
    """``log_gamma[h] * dist[g]`` laid out groups-major, ``(G, heads, S, S)`` (the
    attention paths put the groups in the batch dim).

    ``0 * inf`` would be NaN for a zero rate (``decay='none'`` uses zero distances, never
    zero rates), so padded keys are written as ``-inf`` explicitly.
    """
    pad = torch.isinf(dist)
    bias = log_gamma.float()[:, None, None, None] * dist.masked_fill(pad, 0)[None]
    bias = bias.masked_fill(pad[None], float('-inf'))
    return rearrange(bias, 'h g q k -> g h q k').contiguous()


__all__ = ['DECAY_KINDS', 'decay_log_rates', 'grid_coords', 'grouped_coords', 'slot_coords',
           'pairwise_distance',
           'line_decay_bias', 'grouped_distance', 'decay_bias']
