#!/usr/bin/env python
"""Grad-CAM of an EVT classifier with mmpretrain's own ``tools/visualization/vis_cam.py``.

Same arguments as mmpretrain's tool (``IMG CONFIG CHECKPOINT [--target-layers ...]
[--method ...] [--target-category ...] [--save-path ...]``), which runs unchanged; this
wrapper imports mmevt (registers EVT) and tells the tool which target layers are
channels-last. EVT's stages, blocks and output norms return ``(B, H, W, C)``; vis_cam
reads every 4-D activation as ``(B, C, H, W)``, so for those layers it would weight and
sum the wrong axes (a ``(1, 7, 512)``-shaped map for a stage of EVT-T at 224). Here each
target layer's layout is found by running the model at two input sizes (the axes that
change are the spatial ones), and the activations and gradients of channels-last layers
are permuted to NCHW before Grad-CAM uses them. NCHW layers (e.g. ``backbone.stem``) are
left as they are.

    python tools/visualization/vis_cam.py IMG CONFIG CKPT \\
        --target-layers backbone.stages.2 --save-path cam.png

Needs ``grad-cam`` 1.4.x (1.5 removed the ``use_cuda`` argument that vis_cam passes). An
existing ``--save-path`` is not overwritten.
"""
import importlib.util
import os.path as osp
import sys
import warnings
from types import ModuleType
from typing import Callable, Iterable, List, Sequence, Set, Tuple

import torch
from torch import Tensor, nn

import mmevt  # noqa: F401  registers EVT for the tool's get_model
from mmevt.apis import toolkit_tool_path
from mmevt.patches.legacy_imports import pkg_resources_standin

# two valid EVT input sizes that differ in H and W at every stride (4..32)
PROBE_SIZES = ((224, 224), (288, 256))


def load_vis_cam() -> ModuleType:
    """mmpretrain's ``vis_cam.py`` (shipped in its ``.mim/tools``) as a module."""
    path = toolkit_tool_path('mmpretrain', osp.join('visualization', 'vis_cam'))
    spec = importlib.util.spec_from_file_location('mmpretrain_vis_cam', path)
    module = importlib.util.module_from_spec(spec)
    with pkg_resources_standin():  # mmpretrain 1.2.0's script imports it (mmevt.patches)
        spec.loader.exec_module(module)
    return module


def channels_last_layers(model: nn.Module, layers: Sequence[nn.Module],
                         sizes: Sequence[Tuple[int, int]] = PROBE_SIZES) -> Set[int]:
    """``id``s of the ``layers`` whose output is a channels-last ``(B, H, W, C)`` tensor.

    The model runs once per input size in ``sizes`` (zeros, no grad); a 4-D output whose
    axes 1, 2 change with the size and axis 3 does not is channels-last. A model that
    fails at a probe size gets a warning and an empty set (vis_cam's own reading).
    """
    shapes = {id(layer): [] for layer in layers}

    def record(module: nn.Module, args, output) -> None:
        if isinstance(output, Tensor):
            shapes[id(module)].append(tuple(output.shape))

    handles = [layer.register_forward_hook(record) for layer in layers]
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            for h, w in sizes:
                model(torch.zeros(1, 3, h, w, device=device))
    except Exception as err:  # e.g. a non-EVT model that takes one input size only
        warnings.warn(f'vis_cam: the layout probe at input sizes {list(sizes)} failed '
                      f'({type(err).__name__}: {err}); every target layer is read as '
                      'NCHW, as mmpretrain\'s vis_cam reads it')
        return set()
    finally:
        for handle in handles:
            handle.remove()
    out = set()
    for key, seen in shapes.items():
        if len(seen) == 2 and len(seen[0]) == len(seen[1]) == 4:
            changed = [a != b for a, b in zip(*seen)]
            if changed == [False, True, True, False]:
                out.add(key)
    return out


def _to_nchw(x: Tensor) -> Tensor:
    return x.permute(0, 3, 1, 2)


class _NCHWGrad:
    """Stands in for a channels-last output in grad-cam's ``save_gradient``: the hook it
    registers receives the gradient permuted to NCHW."""

    def __init__(self, output: Tensor):
        self.output = output
        self.requires_grad = output.requires_grad

    def register_hook(self, hook: Callable[[Tensor], None]):
        return self.output.register_hook(lambda grad: hook(_to_nchw(grad)))


def layout_aware_activations(base: type) -> type:
    """A subclass of grad-cam's ``ActivationsAndGradients`` (``base``) that permutes the
    activations and gradients of channels-last target layers to NCHW."""

    class LayoutAwareActivationsAndGradients(base):

        def __init__(self, model: nn.Module, target_layers: List[nn.Module],
                     reshape_transform: Callable, channels_last: Iterable[int]):
            self.channels_last = set(channels_last)
            super().__init__(model, target_layers, reshape_transform)

        def save_activation(self, module, input, output):
            if id(module) in self.channels_last:
                output = _to_nchw(output)
            super().save_activation(module, input, output)

        def save_gradient(self, module, input, output):
            if id(module) in self.channels_last:
                output = _NCHWGrad(output)
            super().save_gradient(module, input, output)

    return LayoutAwareActivationsAndGradients


def patch(vis_cam: ModuleType) -> ModuleType:
    """Make ``vis_cam`` read channels-last target layers correctly and refuse to overwrite
    an existing ``--save-path``; returns the same module."""
    original_init_cam, original_parse_args = vis_cam.init_cam, vis_cam.parse_args
    activations_cls = layout_aware_activations(vis_cam.ActivationsAndGradients)

    def init_cam(method, model, target_layers, use_cuda, reshape_transform):
        cam = original_init_cam(method, model, target_layers, use_cuda, reshape_transform)
        cam.activations_and_grads.release()
        cam.activations_and_grads = activations_cls(
            cam.model, cam.target_layers, reshape_transform,
            channels_last_layers(model, cam.target_layers))
        return cam

    def parse_args():
        args = original_parse_args()
        if args.save_path is not None and osp.exists(args.save_path):
            raise ValueError(f'--save-path {str(args.save_path)!r} exists; pass a new file '
                             '(an existing picture is not overwritten)')
        return args

    vis_cam.init_cam, vis_cam.parse_args = init_cam, parse_args
    return vis_cam


def main() -> None:
    patch(load_vis_cam()).main()


if __name__ == '__main__':
    sys.exit(main())
