"""Feed-forward network with an optional depth-wise conv inside (RMT/EVT's FFN)."""
from torch import Tensor, nn

from .conv import DWConv2d


class ConvFFN(nn.Module):
    """``fc1 -> GELU -> h; h = h + DWConv3x3(h); fc2`` on channels-last tensors.

    Args:
        embed_dims (int): input/output channels C.
        hidden_dims (int): hidden channels.
        dwconv (bool): use the inner depth-wise conv residual; without it this is
            Swin's plain MLP. Defaults to True.

    Shapes: ``(B, H, W, C) -> (B, H, W, C)``.
    """

    def __init__(self, embed_dims: int, hidden_dims: int, dwconv: bool = True):
        super().__init__()
        self.fc1 = nn.Linear(embed_dims, hidden_dims)
        self.act = nn.GELU()
        self.dwconv = DWConv2d(hidden_dims, 3) if dwconv else None
        self.fc2 = nn.Linear(hidden_dims, embed_dims)

    def forward(self, x: Tensor) -> Tensor:
        x = self.act(self.fc1(x))
        if self.dwconv is not None:
            x = x + self.dwconv(x)
        return self.fc2(x)
