"""RMT's decomposed decay attention (MaSA): attention along each row, then along each
column, with the 1D decay of each pass; the reference and SDPA paths of
:mod:`mmevt.ops.attention`."""
from typing import Optional

import torch
from einops import rearrange
from torch import Tensor

from .attention import ATTN_IMPLS, attention_probs, attention_reference, attention_sdpa
from .checks import check_choice, renamed_argument
from .decay import line_decay_bias


# RMT's decomposition: rows are sequences along W batched over (B, H), columns along H
# batched over (B, W)
_ROWS = 'b h w n d -> (b h) n w d'
_COLS = 'b h w n d -> (b w) n h d'


def _line_bias(length: int, log_gamma: Tensor, dtype: torch.dtype) -> Tensor:
    # 4-D: with a 3-D mask SDPA on CPU falls back to its unfused math kernel
    return line_decay_bias(length, log_gamma).to(dtype)[None]


def decomposed_decay_attention(q: Tensor,
                               k: Tensor,
                               v: Tensor,
                               log_gamma: Tensor,
                               scale: Optional[float] = None,
                               attn_impl: str = 'auto',
                               *,
                               dropout_p: float = 0.,
                               impl: Optional[str] = None) -> Tensor:
    """RMT's decomposed MaSA: attention along each row, then along each column.

    The row pass (decay ``|dc|``) is applied to ``v``; the column pass (decay ``|dr|``) to
    the row pass's result, exactly as the authors' ``VisionRetentionChunk``. In 1D the
    Euclidean and Manhattan distances coincide, so this op has no ``decay`` argument.

    Args:
        q, k, v (Tensor): shape ``(B, H, W, heads, D)``.
        log_gamma (Tensor): shape ``(heads,)``.
        scale (float, optional): logit scale. Defaults to ``D ** -0.5``.
        attn_impl (str): ``'reference'`` or ``'sdpa'`` (``'auto'`` and ``'flex'`` use SDPA).
            Defaults to ``'auto'``.
        dropout_p (float): attention dropout in both passes; pass 0 outside training.
            Defaults to 0.
        impl: deprecated name of ``attn_impl``.

    Returns:
        Tensor: shape ``(B, H, W, heads, D)``.
    """
    attn_impl = renamed_argument('decomposed_decay_attention', 'impl', 'attn_impl', impl,
                                 None if attn_impl == 'auto' else attn_impl) or 'auto'
    check_choice('attn_impl', attn_impl, ATTN_IMPLS)
    b, h, w, heads, d = q.shape
    scale = d ** -0.5 if scale is None else scale
    attn = attention_reference if attn_impl == 'reference' else attention_sdpa
    qw, kw, vw = (rearrange(t, _ROWS) for t in (q, k, v))
    rows = attn(qw, kw, vw, _line_bias(w, log_gamma, q.dtype), scale, dropout_p)
    qh, kh = (rearrange(t, _COLS) for t in (q, k))
    vh = rearrange(rows, '(b h) n w d -> (b w) n h d', b=b)
    out = attn(qh, kh, vh, _line_bias(h, log_gamma, q.dtype), scale, dropout_p)
    return rearrange(out, '(b w) n h d -> b h w n d', b=b)


def decomposed_decay_probs(q: Tensor, k: Tensor, log_gamma: Tensor,
                           scale: Optional[float] = None) -> Tensor:
    """The row and column passes of :func:`decomposed_decay_attention` (their reference
    probabilities) composed into the dense ``N x N`` matrix they apply together.

    Args:
        q, k (Tensor): shape ``(B, H, W, heads, D)``.
        log_gamma (Tensor): shape ``(heads,)``.
        scale (float, optional): logit scale. Defaults to ``D ** -0.5``.

    Returns:
        Tensor: shape ``(B, heads, N, N)`` with ``N = H * W`` row-major, each row sums to 1.
    """
    b, h, w, heads, d = q.shape
    scale = d ** -0.5 if scale is None else scale
    rows = attention_probs(rearrange(q, _ROWS), rearrange(k, _ROWS),
                           _line_bias(w, log_gamma, q.dtype), scale)
    cols = attention_probs(rearrange(q, _COLS), rearrange(k, _COLS),
                           _line_bias(h, log_gamma, q.dtype), scale)
    rows = rearrange(rows, '(b r) n c t -> b r n c t', b=b)  # [b, r', head, c, c']
    cols = rearrange(cols, '(b c) n r s -> b c n r s', b=b)  # [b, c, head, r, r']
    # out(r, c) = sum_r' cols[c][r, r'] sum_c' rows[r'][c, c'] v(r', c')
    dense = torch.einsum('bcnrs,bsnct->bnrcst', cols, rows)
    return dense.reshape(b, heads, h * w, h * w)
