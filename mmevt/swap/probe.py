"""Probing SRC's original backbone: build it, run it once, map its outputs onto EVT stages.

Nothing is guessed from channel values alone: the backbone is built on the CPU and run once
at :data:`PROBE_SIZE`, which gives the channels and strides of its outputs. Each output goes
to the EVT stage of the same stride (:data:`EVT_STRIDES`); an output whose stride does not
grow over the previous output's (a dilated backbone) goes to the next EVT stage.
"""
import math
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from ..toolkits import TOOLKIT_TABLE, build_model, get_toolkit
from ..toolkits.config_values import to_plain

EVT_STRIDES = (4, 8, 16, 32)
# Side of the square input the original backbone is probed with, per toolkit (why these:
# :attr:`mmevt.toolkits.base.Toolkit.probe_size`, each toolkit's module).
PROBE_SIZE = {name: facts.probe_size for name, facts in TOOLKIT_TABLE.items()}


@dataclass
class BackboneOutputs:
    """What the original backbone returns, measured by running it.

    Attributes:
        type (str): the backbone's registry name.
        channels (list[int]): channels of each output.
        strides (list[int | None]): stride of each output; None for a pooled ``(B, C)``
            output (e.g. a ViT's class token, ConvNeXt's pooled features).
    """
    type: str
    channels: List[int]
    strides: List[Optional[int]]

    def describe(self) -> str:
        """The outputs as ``channels@1/stride`` (``channels@pooled``), comma-separated."""
        return ', '.join(f'{c}@{"pooled" if s is None else f"1/{s}"}'
                         for c, s in zip(self.channels, self.strides))


def _swappable_type(backbone_cfg: dict) -> str:
    """The backbone's registry name; an EVT backbone is an error (nothing to swap)."""
    name = backbone_cfg.get('type', '?')
    if name == 'EVT':
        raise ValueError('SRC already has an EVT backbone: swap from the original config')
    return name


def build_source_model(model_cfg: dict, toolkit: str) -> Any:
    """SRC's whole model built on the CPU (no weights read), for counting it; its
    ``backbone`` is then the one :func:`measure_backbone` probes, so SRC is built once.

    Args:
        model_cfg (dict): SRC's model config as the runner builds it
            (:func:`mmevt.swap.smoke.runner_model_cfg`).
        toolkit (str): SRC's toolkit (its ``default_scope``).

    Returns:
        nn.Module: the model.

    Raises:
        ValueError: SRC has an EVT backbone, or its model cannot be built.
    """
    _swappable_type(model_cfg['backbone'])
    try:
        return build_model(model_cfg, toolkit)
    except Exception as err:
        raise ValueError(f'cannot build the original model {model_cfg.get("type", "?")} of '
                         f'SRC to count it: {type(err).__name__}: {err}') from err


def measure_backbone(backbone_cfg: dict, toolkit: str, size: Optional[int] = None, *,
                     backbone: Any = None) -> Tuple[BackboneOutputs, Any]:
    """Run the original backbone (on the CPU, no weights loaded) on a ``(1, 3, size, size)``
    input of zeros and read its outputs' channels and strides.

    Args:
        backbone_cfg (dict): SRC's ``model.backbone``.
        toolkit (str): SRC's toolkit (its ``default_scope``).
        size (int, optional): the input side. Defaults to the toolkit's :data:`PROBE_SIZE`.
        backbone (nn.Module, optional): that backbone already built (inside the model of
            :func:`build_source_model`). Defaults to None (built here from
            ``backbone_cfg`` without its ``init_cfg`` / ``pretrained``).

    Returns:
        tuple: the measured :class:`BackboneOutputs` and the backbone (in eval mode).

    Raises:
        ValueError: SRC has an EVT backbone, the backbone cannot be built or run, or an
            output is neither a ``(B, C, H, W)`` map nor ``(B, C)`` pooled features.
    """
    import torch
    size = size or get_toolkit(toolkit).probe_size
    name = _swappable_type(backbone_cfg)
    if backbone is None:
        cfg = to_plain(backbone_cfg)
        cfg.pop('init_cfg', None)  # the architecture only: no download, no checkpoint
        cfg.pop('pretrained', None)
        try:
            backbone = build_model(cfg, toolkit)
        except Exception as err:
            raise ValueError(f'cannot build the original backbone {name} of SRC to measure '
                             f'its outputs: {type(err).__name__}: {err}') from err
    backbone.eval()
    with torch.no_grad():
        try:
            outs = backbone(torch.zeros(1, 3, size, size))
        except Exception as err:
            raise ValueError(f'the original backbone {name} fails on a {size} x {size} '
                             f'input: {type(err).__name__}: {err}') from err
    if isinstance(outs, torch.Tensor):
        outs = (outs, )
    channels, strides = [], []
    for i, out in enumerate(outs):
        if isinstance(out, (list, tuple)) and out and isinstance(out[-1], torch.Tensor):
            out = out[-1]  # mmpretrain ViTs of older layouts: (patch tokens, cls token)
        if not isinstance(out, torch.Tensor) or out.dim() not in (2, 4):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f'backbone {name}: output {i} is {shape}; only feature maps '
                             '(B, C, H, W) and pooled features (B, C) can be swapped')
        channels.append(int(out.shape[1]))
        if out.dim() == 2:
            strides.append(None)
        else:
            strides.append(2 ** round(math.log2(size / out.shape[-2])))
    return BackboneOutputs(name, channels, strides), backbone


def map_outputs(outputs: BackboneOutputs) -> Tuple[List[int], List[str]]:
    """The EVT stage for each original output, and notes for the user.

    Rule: an output of stride s goes to the EVT stage of stride s (4, 8, 16, 32 -> 0..3).
    An output whose stride is not larger than the previous one's (dilation) goes to the
    stage after the previous output's (EVT has no dilation; the decode heads resize their
    inputs, so they accept the coarser maps). A pooled output goes to the last stage.

    Args:
        outputs (BackboneOutputs): what :func:`measure_backbone` measured.

    Returns:
        tuple: the EVT stage of each output, and notes (dilation, pooled outputs).

    Raises:
        ValueError: a stride outside 4..32, or outputs that do not map one-to-one.
    """
    stages, notes, dilated = [], [], []
    for i, s in enumerate(outputs.strides):
        if s is None:
            stage = len(EVT_STRIDES) - 1
        elif stages and outputs.strides[i - 1] is not None and s <= outputs.strides[i - 1]:
            stage = stages[-1] + 1
            dilated.append(i)
        elif s in EVT_STRIDES:
            stage = EVT_STRIDES.index(s)
        else:
            raise ValueError(f'backbone {outputs.type}: output {i} has stride {s}; EVT has '
                             f'strides {list(EVT_STRIDES)}')
        if stage >= len(EVT_STRIDES) or (stages and stage <= stages[-1]):
            raise ValueError(f'backbone {outputs.type}: outputs {outputs.describe()} do not '
                             f'map one-to-one onto EVT stages of strides {list(EVT_STRIDES)}')
        stages.append(stage)
    if dilated:
        notes.append(f'{outputs.type} is dilated (strides {outputs.strides}): EVT has no '
                     f'dilation, so its outputs {dilated} come from the next EVT stages '
                     f'(strides {[EVT_STRIDES[stages[i]] for i in dilated]}); the heads '
                     'resize their inputs')
    if None in outputs.strides:
        notes.append(f'{outputs.type} returns pooled features: EVT returns maps, which a '
                     'GlobalAveragePooling neck pools')
    return stages, notes
