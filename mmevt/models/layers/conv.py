"""Convolutional pieces: conv stem, downsampling, depth-wise convs (CPE, LePE, FFN) and
Swin's patch embedding / merging for the EVT-Swin variants."""
from typing import Optional

import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from ...ops.depthwise import dwconv
from ...ops.recompute import training_op_active
from .norm import build_norm


class ConvNorm(nn.Sequential):
    """``conv -> norm -> (GELU)`` on NCHW tensors.

    Args:
        in_channels (int): input channels.
        out_channels (int): output channels.
        stride (int): conv stride. Defaults to 1.
        norm_cfg (dict): norm config. Defaults to ``dict(type='BN')``.
        act (bool): append GELU. Defaults to True.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1,
                 norm_cfg: Optional[dict] = dict(type='BN'), act: bool = True):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride, 1)
        self.norm = build_norm(norm_cfg, out_channels)
        if act:
            self.act = nn.GELU()


class ConvStem(nn.Sequential):
    """RMT/EVT stem, 4x down: conv s2 (C/2), conv (C/2), conv s2 (C), conv (C, no act).

    Input ``(B, in_channels, H, W)``; output ``(B, C, ceil(H/4), ceil(W/4))`` (NCHW).
    """

    def __init__(self, in_channels: int, embed_dims: int,
                 norm_cfg: Optional[dict] = dict(type='BN')):
        half = embed_dims // 2
        super().__init__(
            ConvNorm(in_channels, half, 2, norm_cfg),
            ConvNorm(half, half, 1, norm_cfg),
            ConvNorm(half, embed_dims, 2, norm_cfg),
            ConvNorm(embed_dims, embed_dims, 1, norm_cfg, act=False))


class ConvDownsample(ConvNorm):
    """Between stages: conv3x3 s2 + norm, channels-last in and out ``(B, H, W, C)``."""

    def __init__(self, in_channels: int, out_channels: int,
                 norm_cfg: Optional[dict] = dict(type='BN')):
        super().__init__(in_channels, out_channels, 2, norm_cfg, act=False)

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


class DWConv2d(nn.Module):
    """Depth-wise conv on a channels-last tensor ``(B, H, W, C) -> (B, H, W, C)``.

    Where a backward pass follows it runs as :func:`~mmevt.ops.depthwise.dwconv` (the
    same conv, with the fast weight gradient); elsewhere (inference, export) as
    ``self.conv``.
    """

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, 1, kernel_size // 2,
                              groups=channels)

    def forward(self, x: Tensor) -> Tensor:
        if training_op_active(x, *self.parameters()):
            return dwconv(x, self.conv.weight, self.conv.bias)
        return self.conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


class PatchEmbed(nn.Module):
    """Swin patch embedding: 4x4 conv stride 4 + LayerNorm, zero-padding odd sizes.

    Input ``(B, C_in, H, W)``; output ``(B, C, ceil(H/4), ceil(W/4))`` (NCHW).
    """

    def __init__(self, in_channels: int, embed_dims: int, patch_size: int = 4):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_channels, embed_dims, patch_size, patch_size)
        self.norm = nn.LayerNorm(embed_dims)

    def forward(self, x: Tensor) -> Tensor:
        p = self.patch_size
        x = F.pad(x, (0, -x.shape[-1] % p, 0, -x.shape[-2] % p))
        x = self.proj(x).permute(0, 2, 3, 1)
        return self.norm(x).permute(0, 3, 1, 2)


class PatchMerging(nn.Module):
    """Swin patch merging, channels-last: 2x2 neighbours concatenated, LayerNorm, linear.

    Odd sizes are zero-padded. ``(B, H, W, C) -> (B, ceil(H/2), ceil(W/2), C_out)``.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.norm = nn.LayerNorm(4 * in_channels)
        self.reduction = nn.Linear(4 * in_channels, out_channels, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        x = F.pad(x, (0, 0, 0, x.shape[2] % 2, 0, x.shape[1] % 2))
        x = merge_2x2(x)
        return self.reduction(self.norm(x))


def merge_2x2(x: Tensor) -> Tensor:
    """``(B, 2h, 2w, C) -> (B, h, w, 4C)`` in Swin's order (x00, x10, x01, x11)."""
    return rearrange(x, 'b (h i) (w j) c -> b h w (j i c)', i=2, j=2)
