"""Params and FLOPs of OpenMMLab models with the toolkits' own counter, without a dataset.

The counter is mmengine's ``FlopAnalyzer``, the one mmdet's, mmseg's and mmpretrain's
``get_flops.py`` use (through ``get_model_complexity_info``): it traces one forward pass
with ``torch.jit`` and counts one FLOP per multiply-add of convolutions, linears, matmuls,
norms, upsampling and pooling; other elementwise ops are not counted. ``import mmevt`` adds
scaled-dot-product attention to it (:mod:`mmevt.patches.flop_handles`). The trace computes
for real (it cannot run on the ``meta`` device), so a count costs one forward pass.

The forward pass is the toolkits' ``mode='tensor'`` one, what their ``get_flops.py`` count:
detectors and segmentors without post-processing (a two-stage detector's RoI heads run on
the proposals its RPN keeps), classifiers up to the logits; auxiliary heads, which run only
in training, are not part of it. mmaction2's 2D recognizers (TSN) count a clip of
:func:`~mmevt.toolkits.mmaction.clip_segments` frames, ``(1, segments, 3, H, W)``, up to
the logits (``mode='tensor'`` with ``stage='head'``; mmaction2's own ``get_flops.py``
counts ``extract_feat``, what ``features_only`` counts here). What differs by toolkit (the
default shape, the clip, the forward traced) the toolkit's module says
(:meth:`mmevt.toolkits.base.Toolkit.flops_forward`).
"""
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ..toolkits import TOOLKIT_TABLE, get_toolkit
from .complexity import count_params

PARTS = ('backbone', 'neck')  # reported on their own; everything else is "heads"
# The sizes the papers quote FLOPs at, per toolkit (:data:`mmevt.toolkits.TOOLKIT_TABLE`);
# for video a frame's, a clip having the toolkit's ``clip_frames`` frames.
DEFAULT_SHAPES = {name: facts.flops_shape for name, facts in TOOLKIT_TABLE.items()}


@contextmanager
def _forward_as(model: nn.Module, forward: Callable[..., Any]) -> Iterator[None]:
    """Make ``model(*args)`` run ``forward(*args)`` (an instance attribute over the class's
    ``forward``, as mmdet's ``get_flops.py`` does), so module hooks and scopes still work."""
    saved = model.__dict__.get('forward')  # an instance-level forward set by someone else
    model.forward = forward
    try:
        yield
    finally:
        del model.forward
        if saved is not None:
            model.forward = saved


def analyze_flops(model: nn.Module, inputs: Tuple[Tensor, ...],
                  forward: Optional[Callable[..., Any]] = None):
    """mmengine's ``FlopAnalyzer`` of one call ``forward(*inputs)`` (``model(*inputs)`` by
    default), already run, without gradients.

    Args:
        model (nn.Module): the model; its submodules' names key ``by_module()``.
        inputs (tuple[Tensor]): positional inputs, e.g. ``(x, )`` with ``x`` of shape
            ``(B, C, H, W)``.
        forward (callable, optional): what ``model(*inputs)`` should run, e.g. a bound
            method with keyword arguments bound. Defaults to None (``model.forward``).

    Returns:
        FlopAnalyzer: with ``total()``, ``by_module()``, ``by_operator()`` and
        ``unsupported_ops()``; its warnings are off (read ``unsupported_ops()``).
    """
    from mmengine.analysis import FlopAnalyzer
    analyzer = FlopAnalyzer(model, inputs)
    analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    with torch.no_grad(), (_forward_as(model, forward) if forward else nullcontext()):
        analyzer.total()  # traces now, while ``forward`` is in place; results are cached
    return analyzer


def count_flops(model: nn.Module, input_shape: Tuple[int, ...],
                forward: Optional[Callable[..., Any]] = None) -> int:
    """mmengine's count (one FLOP per multiply-add, norms included) of one forward pass on
    an input of ``input_shape`` ``(B, C, H, W)``, as the toolkits' ``get_flops.py`` count.

    Raises whatever the trace raises (a model the counter cannot trace).
    """
    x = torch.zeros(input_shape, device=next(model.parameters()).device)
    return int(analyze_flops(model, (x, ), forward).total())


def build_from_config(cfg, device: str = 'cpu') -> Tuple[nn.Module, str]:
    """The model of a config, in eval mode, SyncBN turned into BN, weights not loaded.

    Args:
        cfg (mmengine.Config): a det / seg / cls config (``default_scope`` ``mmdet``,
            ``mmseg`` or ``mmpretrain``).
        device (str): where to build it. Defaults to ``'cpu'``.

    Returns:
        tuple: ``(model, scope)``.
    """
    from ..toolkits import build_model, config_toolkit
    scope = config_toolkit(cfg, 'config')
    # seeded: the same random weights (and proposals) on every run
    model = build_model(cfg, seed=0, revert_sync_bn=True, device=device, eval_mode=True)
    return model, scope


def padded_shape(cfg, shape: Sequence[int]) -> Tuple[int, int]:
    """``(H, W)`` padded as the config's data preprocessor pads a test image of that size
    (mmdet: to a multiple of ``pad_size_divisor``)."""
    divisor = cfg.model.get('data_preprocessor', {}).get('pad_size_divisor', 1) or 1
    return tuple(-(-int(s) // divisor) * divisor for s in shape)


def config_complexity(cfg, shape: Optional[Sequence[int]] = None, device: str = 'cpu',
                      features_only: bool = False) -> Dict[str, Any]:
    """Params and FLOPs of a config's model on one input, whole and by part.

    Args:
        cfg (mmengine.Config): a det / seg / cls / pose / rotated-detection config, or an
            mmaction2 2D recognizer's (its clips' frames:
            :func:`~mmevt.toolkits.mmaction.clip_segments`).
        shape (tuple[int, int], optional): input ``(H, W)`` (a frame's, for mmaction2),
            padded as the config's data preprocessor pads (see :func:`padded_shape`).
            Defaults to None (:data:`DEFAULT_SHAPES` of the config's toolkit).
        device (str): where to count. Defaults to ``'cpu'``.
        features_only (bool): count only ``extract_feat`` (backbone + neck), e.g. because a
            detector's RoI heads cost what its proposals cost. Defaults to False.

    Returns:
        dict: ``scope``, ``shape`` (the padded input ``(H, W)``), ``input_shape`` (what the
        model was run on: ``(1, 3, H, W)``; ``(1, segments, 3, H, W)`` for mmaction2's 2D
        recognizers), ``params`` and ``flops``,
        each a dict with ``total``, ``backbone``, ``neck`` and ``heads`` (``heads`` is
        the rest: the model minus backbone and neck; params include heads that run only
        in training), ``unsupported`` (op name -> times traced; ops the counter skips) and
        ``proposals`` (RoIs of a two-stage detector's first RoI head, else None).

    Raises:
        ValueError: an mmaction2 model other than a 2D recognizer.
    """
    model, scope = build_from_config(cfg, device)
    kit = get_toolkit(scope)
    hw = padded_shape(cfg, shape or kit.flops_shape)
    # a 2D recognizer runs its backbone on each frame of a clip
    frames = kit.clip_frames(cfg)
    lead = (1, frames) if frames else (1, )
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(lead + (3, ) + hw, generator=gen).to(device)
    forward = kit.flops_forward(model, hw, features_only)
    rois = []
    # int(): under tracing, sizes are tensors
    hooks = [m.register_forward_hook(lambda m, args, out: rois.append(int(args[1].shape[0])))
             for m in model.modules() if type(m).__name__.endswith('RoIExtractor')]
    try:
        analyzer = analyze_flops(model, (x, ), forward)
    finally:
        for h in hooks:
            h.remove()
    by_module = analyzer.by_module()
    flops = dict(total=int(analyzer.total()))
    params = dict(total=count_params(model))
    for part in PARTS:
        flops[part] = int(by_module.get(part, 0))
        params[part] = count_params(getattr(model, part)) if hasattr(model, part) else 0
    for counts in (flops, params):
        counts['heads'] = counts['total'] - sum(counts[p] for p in PARTS)
    if features_only:
        flops['heads'] = None  # not run
    return dict(scope=scope, shape=hw, input_shape=tuple(x.shape), params=params, flops=flops,
                unsupported=dict(analyzer.unsupported_ops()),
                proposals=rois[0] if rois else None)
