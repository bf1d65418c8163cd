"""``F.scaled_dot_product_attention`` for the ONNX Runtime backend, as torch defines it.

mmdeploy's rewriter of ``F.scaled_dot_product_attention``
(``mmdeploy/pytorch/functions/multi_head_attention_forward.py``) divides the logits by
``scale`` where torch multiplies by it (and takes ``scale`` as the 6th positional argument,
torch's 7th), so a model that passes ``scale`` (EVT: ``head_dim ** -0.5``) exports attention
logits off by a factor ``head_dim``. :func:`scaled_dot_product_attention__onnxruntime`
follows torch's documented definition; registered for the ONNX Runtime backend, mmdeploy
picks it over its default one.
"""
import math
from typing import Optional

import torch
from torch import Tensor

TARGET = 'torch.nn.functional.scaled_dot_product_attention'


def scaled_dot_product_attention__onnxruntime(
        query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
        dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
        enable_gqa: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention`` in plain ops that the TorchScript exporter traces.

    Same signature and result as torch's (the reference implementation in its
    documentation): ``softmax(query @ key^T * scale + bias) @ value``.

    Args:
        query (Tensor): ``(..., Hq, L, E)``.
        key (Tensor): ``(..., Hk, S, E)``.
        value (Tensor): ``(..., Hk, S, Ev)``.
        attn_mask (Tensor, optional): bool (True: attend) or additive float, broadcastable
            to ``(..., Hq, L, S)``. Defaults to None.
        dropout_p (float): dropout on the attention weights (applied whenever > 0, as torch
            does). Defaults to 0.0.
        is_causal (bool): lower-triangular mask. Defaults to False.
        scale (float, optional): logit scale. Defaults to ``E ** -0.5``.
        enable_gqa (bool): ``Hq`` a multiple of ``Hk``; key / value heads are repeated.
            Defaults to False.

    Returns:
        Tensor: ``(..., Hq, L, Ev)``.
    """
    scale = 1. / math.sqrt(query.size(-1)) if scale is None else scale
    if enable_gqa:
        repeat = query.size(-3) // key.size(-3)
        key, value = key.repeat_interleave(repeat, -3), value.repeat_interleave(repeat, -3)
    logits = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool,
                          device=query.device).tril()
        logits = logits.masked_fill(~keep, float('-inf'))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            logits = logits.masked_fill(~attn_mask, float('-inf'))
        else:
            logits = logits + attn_mask
    weights = logits.softmax(dim=-1)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, True)
    return weights @ value
