"""ONNX export of an mmevt classifier, backbone or segmentor with torch's own exporter.

What ``mmevt-onnx`` (``tools/deployment/pytorch2onnx.py``, :func:`mmevt.deploy.cli.onnx_main`)
writes: one ``.onnx`` file per ``--shape H W``, each with a dynamic batch dimension (H and
W are static: :mod:`mmevt.deploy.shapes` says why). The graph is the model in ``tensor``
mode on an already normalised image (``B, 3, H, W``): a classifier returns its logits
``(B, num_classes)``, a segmentor (e.g. Semantic FPN) the decode head's logits
``(B, num_classes, H / 4, W / 4)``, ``--backbone-only`` the backbone's feature maps. The data
preprocessor (mean / std, BGR -> RGB) stays outside the graph; the tool prints it.

torch 2.14's ``torch.onnx.export`` is the dynamo exporter (``torch.export`` + onnxscript),
so this needs the ``onnx`` and ``onnxscript`` packages; checking the file
(:func:`mmevt.deploy.parity.verify_onnx`) and timing it
(:func:`mmevt.deploy.timing.time_tensor_mode`) need ``onnxruntime``.
"""
import os
import os.path as osp
import tempfile
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ..toolkits import build_model, config_toolkit, get_toolkit, load_config
from .shapes import ONNX_DYNAMIC_HW_ERROR, check_shape


class TensorMode(nn.Module):
    """The model's ``tensor`` mode as a plain ``forward(x)`` for ``torch.export``.

    Args:
        model (nn.Module): an mmpretrain classifier, an mmseg segmentor or a backbone.
        kind (str): ``'classifier'``, ``'segmentor'`` or ``'backbone'``.
    """

    def __init__(self, model: nn.Module, kind: str):
        super().__init__()
        self.model = model
        self.kind = kind

    def forward(self, x: Tensor):
        """Args: x (Tensor): ``(B, 3, H, W)`` normalised. Returns: Tensor or tuple."""
        if self.kind == 'backbone':
            return tuple(self.model(x))
        return self.model(x, mode='tensor')


def output_names(kind: str, num_outputs: int) -> List[str]:
    """ONNX output names: ``logits``, ``seg_logits`` or ``feat0``, ``feat1`` ..."""
    if kind == 'classifier':
        return ['logits']
    if kind == 'segmentor':
        return ['seg_logits']
    return [f'feat{i}' for i in range(num_outputs)]


def load_model(config: str, checkpoint: Optional[str] = None, backbone_only: bool = False,
               cfg_options: Optional[dict] = None) -> Tuple[nn.Module, str, dict]:
    """Build the model of ``config`` in eval mode on CPU (SyncBN reverted to BN).

    Args:
        config (str): an mmpretrain classification or mmseg segmentation config (any config
            whose ``model.backbone`` is buildable with ``backbone_only``).
        checkpoint (str, optional): a full-model checkpoint, loaded strictly. Defaults to
            None (random weights: enough to check shapes and export, not to predict).
        backbone_only (bool): export ``model.backbone`` only. Defaults to False.
        cfg_options (dict, optional): overrides merged into the config. Defaults to None.

    Returns:
        tuple: the model, its kind (``'classifier'``, ``'segmentor'``, ``'backbone'``) and
        the data preprocessor's settings (``mean``, ``std``, ``bgr_to_rgb`` when present).

    Raises:
        ValueError: the config's scope is not a toolkit, or its toolkit exports the backbone
            only (an mmdet detector: :attr:`~mmevt.toolkits.base.Toolkit.onnx_refusal`) and
            ``backbone_only`` is False.
    """
    cfg = load_config(config, cfg_options)
    kit = get_toolkit(config_toolkit(cfg, config))
    if not kit.onnx_kind and not backbone_only:
        raise ValueError(f'{config} {kit.onnx_refusal}')
    # the whole model is built (and the checkpoint loaded into it) before taking .backbone,
    # so that a full-model checkpoint's keys match
    model = build_model(cfg, name=config, with_data_preprocessor=True, checkpoint=checkpoint,
                        revert_sync_bn=True, eval_mode=True)
    pre = (cfg.model.get('data_preprocessor') if 'data_preprocessor' in cfg.model
           else cfg.get('data_preprocessor')) or {}
    preprocess = {k: pre[k] for k in ('mean', 'std', 'bgr_to_rgb', 'to_rgb') if k in pre}
    kind = kit.onnx_kind
    if backbone_only:
        model, kind = model.backbone, 'backbone'
    return model, kind, preprocess


def export_onnx(model: nn.Module, kind: str, shape: Sequence[int], out: str,
                overwrite: bool = False, dynamic_hw: bool = False) -> str:
    """Export one input size to ``out`` with a dynamic batch dimension.

    Args:
        model (nn.Module): from :func:`load_model` (eval mode).
        kind (str): ``'classifier'``, ``'segmentor'`` or ``'backbone'``.
        shape (Sequence[int]): ``(H, W)`` of the input.
        out (str): the ``.onnx`` file to write (atomically: a failed export leaves nothing).
        overwrite (bool): replace an existing ``out``. Defaults to False (refuse).
        dynamic_hw (bool): symbolic H and W. Defaults to False; True is refused
            (:mod:`mmevt.deploy.shapes` says why).

    Returns:
        str: ``out``.
    """
    if dynamic_hw:
        raise ValueError(ONNX_DYNAMIC_HW_ERROR)
    h, w = check_shape(shape)
    if osp.exists(out) and not overwrite:
        raise FileExistsError(f'{out} exists; pass --overwrite to replace it')
    wrapper = TensorMode(model, kind).eval()
    x = torch.randn(2, 3, h, w)
    with torch.no_grad():
        outs = wrapper(x)
    n_out = len(outs) if isinstance(outs, (tuple, list)) else 1
    batch = torch.export.Dim('batch', min=1)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix='.onnx', dir=osp.dirname(osp.abspath(out)))
    os.close(fd)
    try:
        with torch.no_grad():
            torch.onnx.export(wrapper, (x, ), tmp, dynamo=True, external_data=False,
                              input_names=['input'], output_names=output_names(kind, n_out),
                              dynamic_shapes={'x': {0: batch}}, verbose=False)
        _check_dynamic_batch(tmp)
        os.replace(tmp, out)
    finally:
        if osp.exists(tmp):
            os.remove(tmp)
    return out


def _check_dynamic_batch(onnx_file: str) -> None:
    """Raise if the exported input's batch dimension is not symbolic.

    When ``torch.export``'s non-strict trace fails, ``torch.onnx.export`` retries in strict
    mode, which may specialise the dynamic dimensions to the example's sizes without an
    error (seen with torch 2.14.1 when H and W were asked to be dynamic).
    """
    import onnx
    dim = onnx.load(onnx_file, load_external_data=False).graph.input[0].type.tensor_type \
        .shape.dim[0]
    if not dim.dim_param:
        raise RuntimeError(f'the exporter fixed the batch dimension to {dim.dim_value}; '
                           'the model has a batch-dependent branch that torch.export '
                           'cannot keep symbolic')


def default_name(config: str, kind: str, shape: Sequence[int]) -> str:
    """``<config stem>[_backbone]_<H>x<W>.onnx``."""
    stem = osp.splitext(osp.basename(config))[0]
    return f"{stem}{'_backbone' if kind == 'backbone' else ''}_{shape[0]}x{shape[1]}.onnx"
