"""Feed-forward network with an optional depth-wise conv inside (RMT/EVT's FFN)."""
from typing import Optional

from torch import Tensor, nn

from ...ops.recompute import norm_conv_ffn, training_op_active
from .conv import DWConv2d


class ConvFFN(nn.Module):
    """``fc1 -> GELU -> h; h = h + DWConv3x3(h); fc2`` on channels-last tensors.

    In training (where a backward pass follows) the branch runs as one op,
    :func:`~mmevt.ops.ffn.norm_conv_ffn`, that saves only its input and fc1's output and
    recomputes GELU, the conv and the pre-norm in the backward pass; the layers' own
    forward hooks do not fire there. Elsewhere (inference, export) the layers run one by
    one.

    Args:
        embed_dims (int): input/output channels C.
        hidden_dims (int): hidden channels.
        dwconv (bool): use the inner depth-wise conv residual; without it this is
            Swin's plain MLP. Defaults to True.
        recompute (bool): the recomputing op in training; False runs the layers one by
            one there too (autograd then saves three hidden-width tensors, not one).
            Defaults to True.

    Shapes: ``(B, H, W, C) -> (B, H, W, C)``.
    """

    def __init__(self, embed_dims: int, hidden_dims: int, dwconv: bool = True,
                 recompute: bool = True):
        super().__init__()
        self.fc1 = nn.Linear(embed_dims, hidden_dims)
        self.act = nn.GELU()
        self.dwconv = DWConv2d(hidden_dims, 3) if dwconv else None
        self.fc2 = nn.Linear(hidden_dims, embed_dims)
        self.recompute = recompute

    def extra_repr(self) -> str:
        return '' if self.recompute else 'recompute=False'

    def forward(self, x: Tensor, norm: Optional[nn.LayerNorm] = None,
                scale: Optional[nn.Module] = None) -> Tensor:
        """Args:
            x (Tensor): ``(B, H, W, C)``.
            norm (nn.LayerNorm, optional): the pre-norm, applied to ``x`` first (inside
                the op, so its output is not saved). Defaults to None.
            scale (nn.Module, optional): applied to the output: ``nn.Identity`` or a
                per-channel scale with a ``gamma`` (the block's layer scale; inside the
                op, so fc2's output is not saved).
                Defaults to None.
        """
        mods = [m for m in (norm, scale) if m is not None]
        if self.recompute and training_op_active(x, *self.parameters(),
                                               *(p for m in mods for p in m.parameters())):
            gamma = getattr(scale, 'gamma', None)  # layer scale's; Identity has none
            assert gamma is not None or scale is None or isinstance(scale, nn.Identity)
            conv = self.dwconv.conv if self.dwconv is not None else None
            return norm_conv_ffn(
                x, *((norm.weight, norm.bias, norm.eps) if norm else (None, None, None)),
                self.fc1.weight, self.fc1.bias, None if conv is None else conv.weight,
                None if conv is None else conv.bias, self.fc2.weight, self.fc2.bias, gamma)
        x = self.act(self.fc1(norm(x) if norm is not None else x))
        if self.dwconv is not None:
            x = x + self.dwconv(x)
        x = self.fc2(x)
        return scale(x) if scale is not None else x
