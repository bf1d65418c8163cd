"""Dense attention matrices and attention rollout of an EVT backbone, for pictures.

The model's own forward never materialises these (fused kernels, groups); each block's
token mixer computes them from its input
(:meth:`~mmevt.models.layers.SpatialDecayAttention.attention_probs`, the probabilities of
its reference path) as dense ``(heads, N, N)`` matrices with zeros between tokens that
never meet.
The pictures are drawn on a real photograph
(:func:`mmevt.utils.sample_images.sample_photo_path`) by default.
"""
import copy
from typing import Dict, List, Tuple

import torch
from torch import Tensor

from ..models.backbones.evt import EVT
from ..models.layers import SpatialDecayAttention
from ..ops import group_token_index, ungroup_pairs
# the photo helpers moved to mmevt.utils.sample_images (importable here for one release)
from ..utils.sample_images import fit_image, sample_photo_path  # noqa: F401


def visible_mask(hw: Tuple[int, int], group_size: int, mode: str) -> Tensor:
    """Which tokens each query can see under a grouped layout (a name in
    :data:`~mmevt.ops.grouping.LAYOUTS`).

    Returns:
        Tensor: bool ``(N, N)``: query token, key token.
    """
    g, s = group_token_index(hw, group_size, mode).shape
    return ungroup_pairs(torch.ones(g, s, s, dtype=torch.bool), hw, group_size, mode)


@torch.no_grad()
def dense_attention(attn: SpatialDecayAttention, x: Tensor) -> Tensor:
    """The attention weights one block applies, as a dense matrix.

    The module's own :meth:`~SpatialDecayAttention.attention_probs`, so every option of
    the module that changes q / k (or the layout) shows in the pictures.

    Args:
        attn (SpatialDecayAttention): the block's token mixer.
        x (Tensor): its input (after the block's norm), ``(H, W, C)`` for one image.

    Returns:
        Tensor: ``(heads, N, N)`` float32, each row sums to 1.
    """
    return attn.attention_probs(x[None])[0].float()


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
