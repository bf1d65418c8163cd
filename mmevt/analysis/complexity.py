"""Parameter and multiply-add counts, the way the RMT/EVT papers report them.

mmevt counts with two conventions, each named once: :func:`count_macs` here (multiply-adds
of matmuls, linears and convolutions, no norms: what the papers' tables compare) and
:func:`mmevt.analysis.flops.count_flops` (mmengine's counter, norms and pooling included:
what every toolkit's ``get_flops.py`` prints). Both are reported in :data:`GIGA` (1e9) and
:data:`GIBI` (2**30) units; parameters in :data:`MEGA`.

MACs come from ``torch.utils.flop_counter`` (matmuls, linears, convolutions; FLOPs / 2).
The attention is counted by running it through the explicit reference path, so the
``q k^T`` and ``A v`` products are counted exactly as a fused kernel computes them
(padding of the last group included).
"""
import copy
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, Optional, Tuple, Union

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from ..models.backbones.evt import EVT
from ..models.layers import SpatialDecayAttention
from ..models.necks import RMTClsNeck


MEGA = 1e6  # parameters are reported in M = 1e6
GIGA = 1e9  # G = 1e9 multiply-adds (mmdet's, mmseg's and mmpretrain's get_flops.py)
GIBI = 2**30  # Gi = 2**30: the RMT authors' figures are fvcore counts / 2**30


def count_params(model: nn.Module) -> int:
    """Number of parameters of ``model`` (trainable or not)."""
    return sum(p.numel() for p in model.parameters())


@contextmanager
def reference_attention(model: nn.Module) -> Iterator[None]:
    """Temporarily route every decay attention through the explicit reference path."""
    mods = [m for m in model.modules() if isinstance(m, SpatialDecayAttention)]
    saved = [m.attn_impl for m in mods]
    for m in mods:
        m.attn_impl = 'reference'
    try:
        yield
    finally:
        for m, impl in zip(mods, saved):
            m.attn_impl = impl


def count_macs(model: nn.Module, input_shape: Tuple[int, ...],
               forward: Optional[Callable[[nn.Module, Tensor], object]] = None) -> int:
    """Multiply-adds of one forward pass on an input of ``input_shape``.

    A copy of the model runs on the ``meta`` device: shapes only, no arithmetic, so
    detection-sized inputs are counted in a second; ``model`` itself is not touched.

    Args:
        model (nn.Module): the model.
        input_shape (tuple): ``(B, C, H, W)``.
        forward (callable, optional): ``forward(model, x)``; defaults to ``model(x)``.
    """
    meta = copy.deepcopy(model)
    meta.eval()  # not chained: some toolkits' backbones' train() returns None (Swin's)
    meta = meta.to('meta')
    x = torch.zeros(input_shape, device='meta')
    with torch.no_grad(), reference_attention(meta), FlopCounterMode(display=False) as fc:
        (forward or (lambda m, t: m(t)))(meta, x)
    return fc.get_total_flops() // 2


# Cost categories by module-path suffix (first match wins); what is left is ``attention``
# (the q k^T and A v matmuls, counted at the attention module itself).
_CATEGORIES = (('stem', ('.stem.', )), ('downsample', ('.downsample.', )),
               ('cpe', ('.cpe.', )), ('lepe', ('.attn.lepe.', )),
               ('qkv_proj', ('.attn.q.', '.attn.k.', '.attn.v.', '.attn.proj.')),
               ('ffn_dwconv', ('.ffn.dwconv.', )),
               ('ffn_linears', ('.ffn.fc1.', '.ffn.fc2.')), ('head', ('.neck.', '.head.')))


def macs_breakdown(model: nn.Module, input_shape: Tuple[int, ...]) -> Dict[str, int]:
    """Multiply-adds of one forward pass split by kind of layer.

    Returns:
        dict: MACs per category (``stem``, ``downsample``, ``cpe``, ``lepe``, ``qkv_proj``,
        ``ffn_dwconv``, ``ffn_linears``, ``head``, ``attention`` and ``total``).
    """
    meta = copy.deepcopy(model)
    meta.eval()  # not chained: some toolkits' backbones' train() returns None (Swin's)
    meta = meta.to('meta')
    x = torch.zeros(input_shape, device='meta')
    with torch.no_grad(), reference_attention(meta), FlopCounterMode(display=False) as fc:
        meta(x)
    # a module's count includes its children's: keep what each module does itself
    counts = {name: sum(ops.values()) // 2 for name, ops in fc.get_flop_counts().items()}
    total = counts.pop('Global')
    own = dict(counts)
    for name, n in counts.items():  # subtract from the nearest counted ancestor
        parent = name.rpartition('.')[0]
        while parent and parent not in own:
            parent = parent.rpartition('.')[0]
        if parent:
            own[parent] -= n
    result = dict.fromkeys([c for c, _ in _CATEGORIES] + ['attention'], 0)
    for name, n in own.items():
        path = '.' + name.partition('.')[2] + '.'  # without the root's class name
        cat = next((c for c, keys in _CATEGORIES if any(k in path for k in keys)),
                   'attention')
        result[cat] += n
    result['total'] = total
    return result


class RMTHeadClassifier(nn.Module):
    """EVT (last stage, no output norm) + the RMT authors' classification neck and head
    (linear to 1024, BN, Swish, pool, linear), for counting only.

    Args:
        arch (str | dict): an EVT arch name or dict.
        num_classes (int): classifier outputs. Defaults to 1000.
    """

    def __init__(self, arch: Union[str, dict], num_classes: int = 1000):
        super().__init__()
        self.backbone = EVT(arch, out_indices=(3, ), out_norm_cfg=None)
        dims = self.backbone.embed_dims[-1]
        self.neck = RMTClsNeck(dims, 1024)
        self.head = nn.Linear(1024, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, 3, H, W)`` images -> ``(B, num_classes)`` logits."""
        return self.head(self.neck(self.backbone(x))[0])


class LinearHeadClassifier(nn.Module):
    """EVT (last stage, one output norm) + global average pooling + one linear layer:
    Swin's head, as in the EVT-Swin ImageNet configs. For counting only.

    Args:
        arch (str | dict): an EVT arch name or dict.
        num_classes (int): classifier outputs. Defaults to 1000.
    """

    def __init__(self, arch: Union[str, dict], num_classes: int = 1000):
        super().__init__()
        self.backbone = EVT(arch, out_indices=(3, ))
        self.head = nn.Linear(self.backbone.embed_dims[-1], num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, 3, H, W)`` images -> ``(B, num_classes)`` logits."""
        return self.head(self.backbone(x)[0].mean((2, 3)))


# the names before they were public (tools and tests imported them), for one release
_RMTClassifier = RMTHeadClassifier
_LinearClassifier = LinearHeadClassifier


def model_complexity(arch: Union[str, dict], img_size: Tuple[int, int] = (224, 224),
                     num_classes: int = 1000, head: str = 'rmt') -> Dict[str, float]:
    """Params and MACs of a classifier and of the backbone alone.

    Args:
        arch (str | dict): an EVT arch name or dict.
        img_size (tuple): ``(H, W)``. Defaults to ``(224, 224)``.
        num_classes (int): classifier outputs. Defaults to 1000.
        head (str): ``'rmt'`` (the authors' RMT head: linear to 1024, BN, Swish, pool,
            linear) or ``'linear'`` (Swin's: pool, linear). Defaults to ``'rmt'``.

    Returns:
        dict: ``params`` and ``macs`` of the classifier, ``backbone_params`` and
        ``backbone_macs`` (the backbone with its four output norms).
    """
    if head not in ('rmt', 'linear'):
        raise ValueError(f"head must be 'rmt' or 'linear', got {head!r}")
    clf = (RMTHeadClassifier if head == 'rmt' else LinearHeadClassifier)(arch, num_classes)
    backbone = EVT(arch)
    shape = (1, 3) + tuple(img_size)
    return dict(params=count_params(clf), macs=count_macs(clf, shape),
                backbone_params=count_params(backbone),
                backbone_macs=count_macs(backbone, shape))
