"""RMT's classification neck: linear to 1024, BatchNorm, Swish, global average pool."""
from typing import Tuple, Union

from mmengine.model import BaseModule
from torch import Tensor, nn


class RMTClsNeck(BaseModule):
    """The authors' RMT pre-logits: ``Linear(C, hidden) -> BN -> Swish -> avg pool``.

    With mmpretrain's ``LinearClsHead(in_channels=hidden)`` after it, an
    ``ImageClassifier`` is exactly the authors' RMT classifier (use the backbone with
    ``out_indices=(3, )`` and ``out_norm_cfg=None``: RMT has no norm before ``proj``).

    Args:
        in_channels (int): channels of the last backbone map.
        hidden_channels (int): projection width. Defaults to 1024.
        return_tokens (bool): also pass the backbone's last map on, unpooled, for a head
            that reads every token (``RMTTokenLabelClsHead``, the authors' token-labelled
            models). Defaults to False.
        init_cfg (dict, optional): Defaults to None.

    Shapes: tuple whose last item is ``(B, C, H, W)`` -> tuple of one ``(B, hidden)``, or
    with ``return_tokens`` ``((B, C, H, W), (B, hidden))``: the pooled vector stays last,
    where mmpretrain's heads look for it.
    """

    def __init__(self, in_channels: int, hidden_channels: int = 1024,
                 return_tokens: bool = False, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self.proj = nn.Linear(in_channels, hidden_channels)
        self.norm = nn.BatchNorm2d(hidden_channels)
        self.act = nn.SiLU()
        self.return_tokens = return_tokens

    def project(self, tokens: Tensor) -> Tensor:
        """The unpooled pre-logits: ``(B, C, H, W) -> (B, hidden, H, W)`` (``proj``, BN,
        Swish per token; the timm models' last features, :mod:`mmevt.timm`)."""
        x = self.proj(tokens.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.act(self.norm(x))

    def forward(self, inputs: Union[Tensor, Tuple[Tensor, ...]]) -> Tuple[Tensor, ...]:
        tokens = inputs[-1] if isinstance(inputs, (tuple, list)) else inputs
        pooled = self.project(tokens).mean(dim=(2, 3))
        return (tokens, pooled) if self.return_tokens else (pooled, )
