"""The evaluation head of the RMT authors' token-labelled classifiers (RMT-S*/B*/L*)."""
from typing import List, Optional, Sequence, Tuple

import torch.nn.functional as F
from mmengine.model import BaseModule
from torch import Tensor, nn


class RMTTokenLabelClsHead(BaseModule):
    """Class logits plus ``aux_weight`` times the best token's auxiliary logits.

    The authors' token-labelled RMT adds a linear ``aux_head`` on every token of the last
    stage and evaluates ``head(pooled) + 0.5 * max over tokens of aux_head(token)``
    (``VisRetNet.forward`` in ``classification_token_label_release/RMT.py`` of
    github.com/qhfan/RMT). This head computes that from ``RMTClsNeck(return_tokens=True)``'s
    ``(token map, pooled vector)``, so an mmpretrain ``ImageClassifier`` evaluates the
    authors' files unchanged. It does not train: token labelling needs per-token targets
    (their dense label maps and mixing of token boxes) that mmpretrain's pipelines do not
    make, so :meth:`loss` refuses.

    Only torch and mmengine are imported at module level; ``predict`` imports mmpretrain's
    ``DataSample`` when called, so mmevt imports on machines without mmpretrain.

    Args:
        num_classes (int): number of classes.
        in_channels (int): width of the pooled vector (the neck's ``hidden_channels``).
        token_channels (int): channels of the token map (the last stage's width).
        aux_weight (float): weight of the token term. Defaults to 0.5 (the authors').
        init_cfg (dict, optional): Defaults to ``dict(type='Normal', layer='Linear',
            std=0.01)``.

    Shapes: ``feats = ((B, token_channels, H, W), (B, in_channels))`` -> ``(B, num_classes)``.
    """

    def __init__(self, num_classes: int, in_channels: int, token_channels: int,
                 aux_weight: float = 0.5,
                 init_cfg: Optional[dict] = dict(type='Normal', layer='Linear', std=0.01)):
        super().__init__(init_cfg=init_cfg)
        for name, value in (('num_classes', num_classes), ('in_channels', in_channels),
                            ('token_channels', token_channels)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f'RMTTokenLabelClsHead: {name} must be a positive int, '
                                 f'got {value!r}')
        self.num_classes = num_classes
        self.aux_weight = aux_weight
        self.fc = nn.Linear(in_channels, num_classes)
        self.aux_fc = nn.Linear(token_channels, num_classes)

    @staticmethod
    def _split(feats: Sequence[Tensor]) -> Tuple[Tensor, Tensor]:
        if not isinstance(feats, (tuple, list)) or len(feats) < 2 or feats[-2].dim() != 4:
            shapes = ([tuple(f.shape) for f in feats] if isinstance(feats, (tuple, list))
                      else tuple(feats.shape))
            raise ValueError(f'RMTTokenLabelClsHead needs (token map (B, C, H, W), pooled '
                             f'(B, C)) from RMTClsNeck(return_tokens=True), got {shapes}')
        return feats[-2], feats[-1]

    def pre_logits(self, feats: Sequence[Tensor]) -> Tensor:
        """The pooled vector ``(B, in_channels)`` (the features before ``fc``)."""
        return self._split(feats)[1]

    def forward(self, feats: Sequence[Tensor]) -> Tensor:
        """Logits ``(B, num_classes)`` from ``((B, C, H, W), (B, in_channels))``."""
        tokens, pooled = self._split(feats)
        aux = self.aux_fc(tokens.flatten(2).transpose(1, 2))  # (B, H*W, num_classes)
        return self.fc(pooled) + self.aux_weight * aux.max(dim=1).values

    def loss(self, feats: Sequence[Tensor], data_samples: list, **kwargs) -> dict:
        raise NotImplementedError(
            'RMTTokenLabelClsHead evaluates the authors\' token-labelled RMT checkpoints; '
            'training it needs token labels (a dense per-token target for the aux_fc '
            'term), which mmpretrain\'s data pipelines do not provide. To fine-tune such a '
            'checkpoint, use RMTClsNeck(return_tokens=False) with a LinearClsHead (its '
            'head.fc weights load; head.aux_fc is then unused).')

    def predict(self, feats: Sequence[Tensor], data_samples: Optional[list] = None
                ) -> List:
        """mmpretrain ``DataSample``s with ``pred_score`` (softmax) and ``pred_label``."""
        from mmpretrain.structures import DataSample
        scores = F.softmax(self(feats), dim=1)
        labels = scores.argmax(dim=1, keepdim=True).detach()
        if data_samples is None:
            data_samples = [None] * scores.size(0)
        out = []
        for sample, score, label in zip(data_samples, scores, labels):
            sample = DataSample() if sample is None else sample
            out.append(sample.set_pred_score(score).set_pred_label(label))
        return out


__all__ = ['RMTTokenLabelClsHead']
