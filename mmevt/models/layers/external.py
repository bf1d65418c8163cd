"""External Attention (Guo et al.): attention to two small learnable memories."""
from einops import rearrange
from torch import Tensor, nn

from ...ops.checks import check_heads


class ExternalAttention(nn.Module):
    """Multi-head External Attention with double normalisation; linear in the tokens.

    Per head, ``A = q M_k`` (memory ``M_k``: ``D -> S``), softmax over the *tokens*, then
    l1-normalised over the ``S`` memory slots; ``out = A M_v`` (``S -> D``). The memories
    are bias-free linears shared by the heads; ``num_heads=1`` is the single-head form.

    Args:
        embed_dims (int): channels C.
        num_heads (int): heads; must divide C. Defaults to 1.
        memory_size (int): memory slots S. Defaults to 64.
        eps (float): guard of the l1 normalisation. Defaults to 1e-9.
        attn_drop_rate (float): dropout on the attention map, in training only (ours: the
            same option as the other mixers). Defaults to 0.

    Shapes: ``(B, H, W, C) -> (B, H, W, C)``.
    """

    def __init__(self, embed_dims: int, num_heads: int = 1, memory_size: int = 64,
                 eps: float = 1e-9, attn_drop_rate: float = 0.):
        super().__init__()
        head_dims = check_heads(embed_dims, num_heads)
        if memory_size <= 0:
            raise ValueError(f'memory_size must be positive, got {memory_size}')
        self.num_heads, self.eps = num_heads, eps
        self.q = nn.Linear(embed_dims, embed_dims)
        self.mk = nn.Linear(head_dims, memory_size, bias=False)
        self.mv = nn.Linear(memory_size, head_dims, bias=False)
        self.attn_drop = nn.Dropout(attn_drop_rate)
        self.proj = nn.Linear(embed_dims, embed_dims)

    def forward(self, x: Tensor) -> Tensor:
        h = x.shape[1]
        q = rearrange(self.q(x), 'b h w (n d) -> b n (h w) d', n=self.num_heads)
        attn = self.mk(q).softmax(dim=-2)  # over tokens
        attn = attn / (attn.sum(dim=-1, keepdim=True) + self.eps)  # l1 over memory slots
        out = rearrange(self.mv(self.attn_drop(attn)), 'b n (h w) d -> b h w (n d)', h=h)
        return self.proj(out)
