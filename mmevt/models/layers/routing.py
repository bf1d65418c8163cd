"""Bi-Level Routing Attention (BiFormer): region routing, then token attention."""
from typing import Optional

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from ...ops.checks import check_heads
from .conv import DWConv2d


class BiLevelRoutingAttention(nn.Module):
    """Bi-Level Routing Attention with LePE and automatic padding.

    The map is split into ``n_win x n_win`` regions. Region-level queries and keys are the
    means of their tokens; each region keeps the ``topk`` regions of highest affinity
    ``q_r . k_r``; its tokens attend to all tokens of those regions (keys/values gathered).
    LePE (5x5 depth-wise conv on v) is added to the output. Sizes not divisible by
    ``n_win`` are zero-padded; padded tokens are left out of the region means and masked
    as keys, so the result does not depend on the padding.

    Args:
        embed_dims (int): channels C.
        num_heads (int): heads; must divide C. Defaults to 8.
        n_win (int): regions per side S. Defaults to 7.
        topk (int): routed regions per region (clipped to ``S * S``). Defaults to 4.
        lepe (bool): add LePE. Defaults to True.
        qk_scale (float, optional): logit scale. Defaults to ``head_dim ** -0.5``.
        attn_drop_rate (float): dropout on the token-level attention weights, in training
            only (ours: the same option as the other mixers). Defaults to 0.

    Shapes: ``(B, H, W, C) -> (B, H, W, C)``.
    """

    def __init__(self, embed_dims: int, num_heads: int = 8, n_win: int = 7, topk: int = 4,
                 lepe: bool = True, qk_scale: Optional[float] = None,
                 attn_drop_rate: float = 0.):
        super().__init__()
        head_dims = check_heads(embed_dims, num_heads)
        if n_win <= 0 or topk <= 0:
            raise ValueError(f'n_win and topk must be positive, got n_win={n_win}, '
                             f'topk={topk}')
        self.num_heads, self.n_win, self.topk = num_heads, n_win, topk
        self.scale = qk_scale or head_dims ** -0.5
        self.attn_drop_rate = attn_drop_rate
        self.qkv = nn.Linear(embed_dims, 3 * embed_dims)
        self.lepe = DWConv2d(embed_dims, 5) if lepe else None
        self.proj = nn.Linear(embed_dims, embed_dims)

    def _regions(self, t: Tensor) -> Tensor:
        """``(B, Hp, Wp, C) -> (B, S*S, rh*rw, C)``: the tokens of each region."""
        return rearrange(t, 'b (s1 rh) (s2 rw) c -> b (s1 s2) (rh rw) c', s1=self.n_win,
                         s2=self.n_win)

    def forward(self, x: Tensor) -> Tensor:
        b, h, w = x.shape[:3]
        s, heads = self.n_win, self.num_heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        lepe = self.lepe(v) if self.lepe is not None else None
        ph, pw = -h % s, -w % s
        valid = x.new_ones(1, h, w, 1)
        if ph or pw:
            q, k, v, valid = (F.pad(t, (0, 0, 0, pw, 0, ph)) for t in (q, k, v, valid))
        rh, rw = (h + ph) // s, (w + pw) // s
        valid = valid.expand(b, -1, -1, 1)
        q, k, v, valid = (self._regions(t) for t in (q, k, v, valid))
        # region level: mean over real tokens, affinity, top-k routing
        count = valid.sum(2).clamp(min=1)
        q_r, k_r = (q * valid).sum(2) / count, (k * valid).sum(2) / count  # (B, S*S, C)
        affinity = q_r @ k_r.transpose(-1, -2)
        affinity = affinity.masked_fill(valid.sum(2).transpose(1, 2) == 0, float('-inf'))
        topk = min(self.topk, s * s)
        idx = affinity.topk(topk, dim=-1).indices  # (B, S*S, k)
        # token level: gather the routed regions' keys and values
        n_r = rh * rw

        def routed(t: Tensor) -> Tensor:
            ch = t.shape[-1]
            src = t[:, None].expand(-1, s * s, -1, -1, -1)  # (B, S*S, S*S, n_r, ch)
            index = idx[..., None, None].expand(-1, -1, -1, n_r, ch)
            return torch.gather(src, 2, index).reshape(b, s * s, topk * n_r, ch)

        kg, vg = routed(k), routed(v)
        key_ok = routed(valid)[..., 0]  # (B, S*S, k*n_r)
        split = 'b r l (n d) -> (b r) n l d'  # one attention per (image, region), per head
        qh, kh, vh = (rearrange(t, split, n=heads) for t in (q, kg, vg))
        mask = torch.zeros_like(key_ok).masked_fill(key_ok == 0, float('-inf'))
        mask = rearrange(mask, 'b r l -> (b r) 1 1 l').to(qh.dtype)
        out = F.scaled_dot_product_attention(
            qh, kh, vh, scale=self.scale, attn_mask=mask,
            dropout_p=self.attn_drop_rate if self.training else 0.)
        out = rearrange(out, '(b s1 s2) n (rh rw) d -> b (s1 rh) (s2 rw) (n d)', s1=s, s2=s,
                        rh=rh)[:, :h, :w]
        if lepe is not None:
            out = out + lepe
        return self.proj(out)
