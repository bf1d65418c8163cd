"""The EVT / RMT block: CPE, token mixer, FFN, each a pre-norm residual branch."""

from typing import Optional

import torch
from torch import Tensor, nn

from ...ops import ForwardTables
from ...ops.recompute import training_op_active
from .attention import SpatialDecayAttention
from .conv import DWConv2d
from .ffn import ConvFFN


class DropPath(nn.Module):
    """Stochastic depth per sample. ``(B, ...) -> (B, ...)``."""

    def __init__(self, drop_prob: float = 0.):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x: Tensor) -> Tensor:
        if self.drop_prob == 0. or not self.training:
            return x
        keep = 1 - self.drop_prob
        mask = x.new_empty((x.shape[0], ) + (1, ) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep

    def extra_repr(self) -> str:
        return f'drop_prob={self.drop_prob}'


class LayerScale(nn.Module):
    """Learnable per-channel scale of a residual branch (channels last)."""

    def __init__(self, dims: int, init_value: float):
        super().__init__()
        self.gamma = nn.Parameter(init_value * torch.ones(dims))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gamma


class EVTBlock(nn.Module):
    """``x += CPE(x); x += DropPath(ls1 * mixer(LN(x))); x += DropPath(ls2 * FFN(LN(x)))``.

    Args:
        embed_dims (int): channels C.
        mixer (nn.Module): token mixer, ``(B, H, W, C) -> (B, H, W, C)``.
        mlp_ratio (float): FFN hidden ratio.
        drop_path (float): stochastic depth rate. Defaults to 0.
        layer_scale (float): init value of layer scale; 0 disables it. Defaults to 0.
        cpe (bool): 3x3 depth-wise conv position encoding. Defaults to True.
        ffn_dwconv (bool): depth-wise conv inside the FFN. Defaults to True.
        recompute (bool): in training, save less for the backward pass and recompute
            cheap work there (:mod:`mmevt.ops.recompute`): the FFN branch keeps its input
            and fc1's output only (LayerNorm, GELU and depth-wise conv rebuilt); with decay
            attention CPE, the pre-norm and q / k / v keep only the block's input (CPE and
            LayerNorm rebuilt). Same gradients; False keeps every intermediate. Defaults
            to True.

    Shapes: ``(B, H, W, C) -> (B, H, W, C)``.
    """

    def __init__(self,
                 embed_dims: int,
                 mixer: nn.Module,
                 mlp_ratio: float,
                 drop_path: float = 0.,
                 layer_scale: float = 0.,
                 cpe: bool = True,
                 ffn_dwconv: bool = True,
                 recompute: bool = True):
        super().__init__()
        self.cpe = DWConv2d(embed_dims, 3) if cpe else None
        self.norm1 = nn.LayerNorm(embed_dims, eps=1e-6)
        self.attn = mixer
        self.norm2 = nn.LayerNorm(embed_dims, eps=1e-6)
        self.ffn = ConvFFN(embed_dims, int(mlp_ratio * embed_dims), ffn_dwconv, recompute)
        self.ls1 = LayerScale(embed_dims, layer_scale) if layer_scale else nn.Identity()
        self.ls2 = LayerScale(embed_dims, layer_scale) if layer_scale else nn.Identity()
        self.drop_path = DropPath(drop_path)
        # decay attention applies the pre-norm inside its q / k / v op and takes the
        # stage's tables (other mixers do neither)
        self.decay_attn = isinstance(mixer, SpatialDecayAttention)
        self.recompute = recompute

    def forward(self, x: Tensor, tables: Optional[ForwardTables] = None) -> Tensor:
        """Args: x (Tensor): ``(B, H, W, C)``; tables (ForwardTables, optional): the
        stage's decay tables of this forward pass. Defaults to None."""
        # CPE, norm and q / k / v as one op when a backward can follow; otherwise the mixer
        # runs as a module (its forward hooks fire: attention pictures, exporters)
        if self.decay_attn and self.recompute and training_op_active(x, *self.parameters()):
            if self.cpe is not None:
                x, q, k, v = self.attn.projections(x, self.norm1, self.cpe)
            else:
                q, k, v = self.attn.projections(x, self.norm1)
            branch = self.attn.mix(q, k, v, tables)
        else:
            if self.cpe is not None:
                x = x + self.cpe(x)
            branch = (self.attn(self.norm1(x), tables=tables) if self.decay_attn else
                      self.attn(self.norm1(x)))
        x = x + self.drop_path(self.ls1(branch))
        return x + self.drop_path(self.ffn(x, self.norm2, self.ls2))
