"""Dense attention matrices and attention rollout of an EVT backbone, for pictures.

The model's own forward never materialises these (fused kernels, groups); here they are
rebuilt from each block's input with the same projections, rotary shift, grouping and
decay, as dense ``(heads, N, N)`` matrices with zeros between tokens that never meet.
The pictures are drawn on a real photograph
(:func:`mmevt.utils.sample_images.sample_photo_path`) by default.
"""
import copy
from typing import Dict, List, Tuple

import torch
from torch import Tensor

from ..models.backbones.evt import EVT
from ..models.layers import SpatialDecayAttention
from ..ops import (apply_rotary, grid_coords, group_token_index, pairwise_distance,
                   rotary_sin_cos)
from ..ops.decay import line_decay_bias
# the photo helpers moved to mmevt.utils.sample_images (importable here for one release)
from ..utils.sample_images import fit_image, sample_photo_path  # noqa: F401


def visible_mask(hw: Tuple[int, int], group_size: int, mode: str) -> Tensor:
    """Which tokens each query can see: bool ``(N, N)`` for the grouped modes."""
    n = hw[0] * hw[1]
    if mode == 'full':
        return torch.ones(n, n, dtype=torch.bool)
    idx = group_token_index(hw, group_size, mode)
    group_of = torch.empty(n, dtype=torch.long)
    for g, row in enumerate(idx):
        group_of[row[row < n]] = g
    return group_of[:, None] == group_of[None, :]


def _softmax_1d(q: Tensor, k: Tensor, log_gamma: Tensor, scale: float) -> Tensor:
    """Attention along one axis with decay ``|i - j|``; q, k ``(L, heads, D)``."""
    logits = torch.einsum('ihd,jhd->hij', q, k) * scale + line_decay_bias(q.shape[0], log_gamma)
    return logits.softmax(-1)  # (heads, L, L)


@torch.no_grad()
def dense_attention(attn: SpatialDecayAttention, x: Tensor) -> Tensor:
    """The attention weights one block applies, as a dense matrix.

    Args:
        attn (SpatialDecayAttention): the block's token mixer.
        x (Tensor): its input (after the block's norm), ``(H, W, C)`` for one image.

    Returns:
        Tensor: ``(heads, N, N)`` float32, each row sums to 1.
    """
    h, w, c = x.shape
    n, heads, d = h * w, attn.num_heads, attn.head_dims
    q = attn.q(x).view(n, heads, d).float()
    k = attn.k(x).view(n, heads, d).float()
    if attn.use_rope:
        sin, cos = rotary_sin_cos((h, w), d)
        q, k = apply_rotary(q[None], sin, cos)[0], apply_rotary(k[None], sin, cos)[0]
    lg = attn.log_gamma.float().cpu()
    if attn.mode == 'decomposed':
        q4, k4 = q.view(h, w, heads, d), k.view(h, w, heads, d)
        rows = torch.stack([_softmax_1d(q4[r], k4[r], lg, attn.scale) for r in range(h)])
        cols = torch.stack([_softmax_1d(q4[:, c_], k4[:, c_], lg, attn.scale)
                            for c_ in range(w)])  # (W, heads, H, H)
        # out(r,c) = sum_r' cols[c][r,r'] sum_c' rows[r'][c,c'] v(r',c')
        dense = torch.einsum('chab,bhcd->hacbd', cols, rows)
        return dense.reshape(heads, n, n)
    p = grid_coords((h, w))
    bias = lg[:, None, None] * pairwise_distance(p, p, attn.decay)[None]
    logits = torch.einsum('ihd,jhd->hij', q, k) * attn.scale + bias
    logits = logits.masked_fill(~visible_mask((h, w), attn.group_size, attn.mode), -torch.inf)
    return logits.softmax(-1)


@torch.no_grad()
def attention_rollout(model: EVT, img: Tensor) -> List[Dict[str, Tensor]]:
    """Per stage, the product over its blocks of ``0.5 * (I + mean-head attention)``.

    Args:
        model (EVT): the backbone (any mode; run in eval).
        img (Tensor): one normalised image ``(1, 3, H, W)``.

    Returns:
        list[dict]: per stage, ``rollout`` ``(N, N)`` and ``hw`` of its grid.
    """
    inputs: Dict[int, List[Tensor]] = {}
    hooks = []
    for i, stage in enumerate(model.stages):
        inputs[i] = []
        for block in stage.blocks:
            hooks.append(block.attn.register_forward_hook(
                lambda mod, args, out, i=i: inputs[i].append(args[0][0].detach().cpu())))
    was_training = model.training
    model.eval()
    try:
        model(img)
    finally:
        for hk in hooks:
            hk.remove()
        model.train(was_training)
    result = []
    for i, stage in enumerate(model.stages):
        xs = inputs[i]
        h, w = xs[0].shape[:2]
        roll = torch.eye(h * w)
        for block, x in zip(stage.blocks, xs):
            a = dense_attention(copy.deepcopy(block.attn).cpu().float(), x.float()).mean(0)
            a = 0.5 * (a + torch.eye(h * w))
            roll = a @ roll
        result.append(dict(rollout=roll, hw=(h, w)))
    return result
