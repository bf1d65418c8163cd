"""Attention with a spatial decay bias: one plain reference and two fast paths.

All paths compute, per head h and group,
``softmax(q k^T * scale + log(gamma_h) * dist(p_i, p_j)) v`` and must agree:

- ``reference``: explicit logits, ``softmax``, matmul. Slow, obviously right.
- ``sdpa``: ``F.scaled_dot_product_attention`` with the (cached) additive bias.
- ``flex``: FlexAttention; the decay is computed inside the kernel from token coordinates
  (``score_mod``), so no ``N x N`` bias tensor exists, and padded keys are removed by a
  cached ``BlockMask`` (only groups that contain padding pay for the mask). Fused on GPUs
  under ``torch.compile``; in eager mode it runs PyTorch's unfused fallback (for tests).
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .decay import (DECAY_KINDS, DecayBiasCache, check_choice, decay_bias, grid_coords,
                    group_token_index, grouped_distance, has_padding, line_decay_bias)
from .grouping import group_tokens, ungroup_tokens

ATTN_IMPLS = ('auto', 'reference', 'sdpa', 'flex')

try:  # FlexAttention exists from torch 2.5; the model must still import without it.
    from torch.nn.attention.flex_attention import create_block_mask as _create_block_mask
    from torch.nn.attention.flex_attention import flex_attention as _flex_attention
except ImportError:  # pragma: no cover - depends on the installed torch
    _create_block_mask = _flex_attention = None


def flex_available() -> bool:
    """Whether this torch has FlexAttention."""
    return _flex_attention is not None


def resolve_impl(impl: str, device: torch.device, head_dim: Optional[int] = None) -> str:
    """Map ``'auto'`` to a concrete path for ``device``.

    ``auto`` picks FlexAttention on CUDA while ``torch.compile`` traces the model (the only
    case where Flex runs fused: decay in-kernel, no bias tensor, block-sparse padding) when
    the head dim suits its kernels (a power of two >= 16), and fused SDPA with a cached bias
    everywhere else (eager Flex materialises the scores; on CPU SDPA is fastest).
    """
    check_choice('attn_impl', impl, ATTN_IMPLS)
    if impl == 'flex' and not flex_available():
        raise ValueError("attn_impl='flex' needs torch >= 2.5 (FlexAttention); "
                         f'this is torch {torch.__version__}')
    if impl != 'auto':
        return impl
    flex_dim = head_dim is None or (head_dim >= 16 and head_dim & (head_dim - 1) == 0)
    if (device.type == 'cuda' and flex_available() and flex_dim
            and torch.compiler.is_compiling()):
        return 'flex'
    return 'sdpa'


def attention_reference(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor],
                        scale: float) -> Tensor:
    """Plain attention with an additive bias.

    Args:
        q, k, v (Tensor): shape ``(B, H, L, D)``.
        bias (Tensor, optional): broadcastable to ``(B, H, L, L)``.
        scale (float): logit scale.

    Returns:
        Tensor: shape ``(B, H, L, D)``.
    """
    logits = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        logits = logits + bias
    return logits.softmax(dim=-1).to(v.dtype) @ v


def attention_sdpa(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor],
                   scale: float) -> Tensor:
    """Fused ``scaled_dot_product_attention``; same contract as :func:`attention_reference`."""
    if bias is not None and bias.dtype != q.dtype:
        bias = bias.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)


def _decay_score_mod(hw: Tuple[int, int], group_size: int, mode: str, kind: str,
                     log_gamma: Tensor):
    """``score_mod`` adding the decay of the grouped layout ``(B, heads * G, S, D)``."""
    n = hw[0] * hw[1]
    idx = group_token_index(hw, group_size, mode, log_gamma.device)  # (G, S)
    g = idx.shape[0]
    pos = grid_coords(hw, log_gamma.device)[idx.clamp(max=n - 1)]  # (G, S, 2)
    rows, cols = pos[..., 0].contiguous(), pos[..., 1].contiguous()
    log_gamma = log_gamma.float()

    def score_mod(score, b, h, q_idx, kv_idx):
        grp, head = h % g, h // g
        dr = rows[grp, q_idx] - rows[grp, kv_idx]
        dc = cols[grp, q_idx] - cols[grp, kv_idx]
        if kind == 'euclidean':
            dist = torch.sqrt(dr * dr + dc * dc)
        elif kind == 'manhattan':
            dist = dr.abs() + dc.abs()
        else:
            dist = dr * 0
        return score + (log_gamma[head] * dist).to(score.dtype)

    return score_mod


def padding_block_mask(hw: Tuple[int, int], group_size: int, mode: str, heads: int,
                       device: torch.device):
    """Flex ``BlockMask`` hiding the padded key slots of the grouped layout.

    Returns:
        BlockMask | None: for ``(B, heads * G, S, S)`` scores (broadcast over B), or None
        when the grid fills every group (no padding, nothing to mask).
    """
    if not has_padding(hw, group_size, mode):
        return None
    idx = group_token_index(hw, group_size, mode, device)  # (G, S)
    valid = idx < hw[0] * hw[1]
    g, s = idx.shape

    def mask_mod(b, h, q_idx, kv_idx):
        return valid[h % g, kv_idx]

    return _create_block_mask(mask_mod, None, heads * g, s, s, device=device)


def spatial_decay_attention(q: Tensor,
                            k: Tensor,
                            v: Tensor,
                            hw: Tuple[int, int],
                            log_gamma: Tensor,
                            decay: str = 'euclidean',
                            mode: str = 'full',
                            group_size: int = 49,
                            scale: Optional[float] = None,
                            impl: str = 'auto',
                            bias_cache: Optional[DecayBiasCache] = None) -> Tensor:
    """Spatial-decay attention over a stage grid, full or inside groups (1D or 2D).

    Args:
        q, k, v (Tensor): shape ``(B, N, heads, D)`` with ``N = H * W`` in row-major order.
        hw (tuple[int, int]): the grid ``(H, W)``.
        log_gamma (Tensor): per-head ``log(gamma_h)``, shape ``(heads,)``.
        decay (str): ``'euclidean'`` (EuSA), ``'manhattan'`` (MaSA) or ``'none'``.
            Defaults to ``'euclidean'``.
        mode (str): ``'full'``, ``'group'``, ``'dilate'`` or the 2D ``'window'`` /
            ``'grid'`` (see :func:`~mmevt.ops.decay.group_token_index`). Defaults to
            ``'full'``.
        group_size (int): tokens per group (ignored for ``full``; a square for the 2D
            modes). Defaults to 49.
        scale (float, optional): logit scale. Defaults to ``D ** -0.5``.
        impl (str): ``'auto'``, ``'reference'``, ``'sdpa'`` or ``'flex'``. Defaults to
            ``'auto'``.
        bias_cache (DecayBiasCache, optional): memo for the additive bias (``sdpa``,
            ``reference``) or the score_mod and padding block mask (``flex``). Defaults to
            None (built on every call).

    Returns:
        Tensor: shape ``(B, N, heads, D)``.
    """
    check_choice('decay', decay, DECAY_KINDS)
    b, n, heads, d = q.shape
    assert n == hw[0] * hw[1], f'{n} tokens do not fill a {hw} grid'
    assert log_gamma.numel() == heads
    scale = d ** -0.5 if scale is None else scale
    impl = resolve_impl(impl, q.device, d)

    def to_groups(x: Tensor) -> Tensor:
        xg = group_tokens(x.reshape(b, n, heads * d), group_size, mode, hw)  # (B, G, S, h*D)
        g, s = xg.shape[1:3]
        return xg.view(b, g, s, heads, d).permute(0, 3, 1, 2, 4).reshape(b, heads * g, s, d)

    qg, kg, vg = to_groups(q), to_groups(k), to_groups(v)
    if impl == 'flex':
        if q.device.type == 'cpu' and torch.is_grad_enabled() and any(
                t.requires_grad for t in (q, k, v)):
            raise ValueError("attn_impl='flex' has no backward on CPU in this torch; use "
                             "attn_impl='sdpa' (or 'auto') to train on CPU")
        def memo(key: tuple, build):  # per-grid tables live in the stage's cache
            if bias_cache is None:
                return build()
            return bias_cache.memo(key + (tuple(hw), group_size, mode, q.device), build)

        score_mod = memo(('flex_decay', decay),
                         lambda: _decay_score_mod(hw, group_size, mode, decay, log_gamma))
        block_mask = memo(('flex_pad', heads),
                          lambda: padding_block_mask(hw, group_size, mode, heads, q.device))
        out = _flex_attention(qg, kg, vg, score_mod=score_mod, block_mask=block_mask,
                              scale=scale)
    else:
        if bias_cache is not None:
            bias = bias_cache.get(log_gamma, hw, group_size, mode, decay, qg.dtype)
        else:
            bias = decay_bias(log_gamma, grouped_distance(hw, group_size, mode, decay,
                                                          q.device)).to(qg.dtype)
        attn = attention_reference if impl == 'reference' else attention_sdpa
        out = attn(qg, kg, vg, bias[None], scale)
    g, s = out.shape[1] // heads, out.shape[2]
    out = out.view(b, heads, g, s, d).permute(0, 2, 3, 1, 4).reshape(b, g, s, heads * d)
    return ungroup_tokens(out, n, mode, hw).view(b, n, heads, d)


def decomposed_decay_attention(q: Tensor,
                               k: Tensor,
                               v: Tensor,
                               log_gamma: Tensor,
                               scale: Optional[float] = None,
                               impl: str = 'auto') -> Tensor:
    """RMT's decomposed MaSA: attention along each row, then along each column.

    The row pass (decay ``|dc|``) is applied to ``v``; the column pass (decay ``|dr|``) to
    the row pass's result, exactly as the authors' ``VisionRetentionChunk``. In 1D the
    Euclidean and Manhattan distances coincide, so this op has no ``decay`` argument.

    Args:
        q, k, v (Tensor): shape ``(B, H, W, heads, D)``.
        log_gamma (Tensor): shape ``(heads,)``.
        scale (float, optional): logit scale. Defaults to ``D ** -0.5``.
        impl (str): ``'reference'`` or ``'sdpa'`` (``'auto'`` and ``'flex'`` use SDPA).
            Defaults to ``'auto'``.

    Returns:
        Tensor: shape ``(B, H, W, heads, D)``.
    """
    b, h, w, heads, d = q.shape
    scale = d ** -0.5 if scale is None else scale
    impl = resolve_impl(impl, q.device)
    attn = attention_reference if impl == 'reference' else attention_sdpa

    def line_bias(length: int) -> Tensor:
        # 4-D: with a 3-D mask SDPA on CPU falls back to its unfused math kernel
        return line_decay_bias(length, log_gamma).to(q.dtype)[None]

    # rows: sequences along W, batch over (B, H)
    qw, kw, vw = (t.permute(0, 1, 3, 2, 4).reshape(b * h, heads, w, d) for t in (q, k, v))
    vw = attn(qw, kw, vw, line_bias(w), scale).view(b, h, heads, w, d)
    # columns: sequences along H, batch over (B, W)
    qh, kh = (t.permute(0, 2, 3, 1, 4).reshape(b * w, heads, h, d) for t in (q, k))
    vh = vw.permute(0, 3, 2, 1, 4).reshape(b * w, heads, h, d)
    out = attn(qh, kh, vh, line_bias(h), scale).view(b, w, heads, h, d)
    return out.permute(0, 3, 1, 2, 4)
