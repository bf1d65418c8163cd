"""What mmdeploy 1.3.1 needs to export on torch >= 2.9, applied only while our deploy tool runs.

mmdeploy 1.3.1 was written for torch 1.x / 2.0; on this project's torch (2.14.1) its
``torch2onnx`` fails for every model, and for some of ours it exports wrong numbers. Five
things, each undone when :func:`mmdeploy_compat` exits (nothing in site-packages is changed):

1. **Exporter.** mmdeploy calls ``torch.onnx.export`` without ``dynamo=``, which since torch
   2.9 means the dynamo exporter (``torch.export``); mmdeploy's rewriters are written for the
   TorchScript tracer and fail under it (``TorchExportError ... data is not allocated yet`` in
   mmdeploy's ``single_stage.py``). Inside the context ``torch.onnx.export`` defaults to
   ``dynamo=False``, the TorchScript exporter, which torch 2.14 still ships.
2. **Removed helper.** mmdeploy's RoIAlign symbolic (Mask R-CNN, Cascade Mask R-CNN) imports
   ``torch.onnx.symbolic_opset9._cast_Long``, which torch removed; the context provides it
   (an ONNX ``Cast`` to int64, what torch's helper emitted).
3. **Attention scale.** mmdeploy's rewriter of ``F.scaled_dot_product_attention``
   (``mmdeploy/pytorch/functions/multi_head_attention_forward.py``) divides the logits by
   ``scale`` where torch multiplies by it (and takes ``scale`` as the 6th positional
   argument, torch's 7th), so a model that passes ``scale`` (EVT: ``head_dim ** -0.5``)
   exports attention logits off by a factor ``head_dim``. The context registers
   :func:`scaled_dot_product_attention`, which follows torch's documented definition, for
   the ONNX Runtime backend; mmdeploy picks a backend-specific rewriter over its default one.
4. **Adaptive pooling.** mmdeploy's rewriter of ``F.adaptive_avg_pool2d`` replaces it by an
   ``avg_pool2d`` with kernel = stride = ``size // output``, which is the same only when the
   output size divides the input size: UperNet's pyramid pooling (scales 1, 2, 3, 6) on the
   16 x 16 stride-32 map of a 512 x 512 image gets 3 x 3 windows of 5 instead of
   PyTorch's overlapping windows of 6, and an 8 x 8 map instead of 6 x 6. The context
   registers :func:`adaptive_avg_pool2d`, PyTorch's windows written out for the static sizes
   of the trace.
5. **Cascade R-CNN with class-specific regression.** mmdeploy's rewriter of
   ``CascadeRoIHead.predict_bbox`` asserts ``reg_class_agnostic`` for the stages before the
   last; our Cascade configs regress per class (the RMT authors' heads). The context
   registers :func:`cascade_roi_head_predict_bbox`, which gives mmdeploy's rewriter each
   such stage's deltas of its arg-max class (mmdet's ``regress_by_class`` in
   ``CascadeRoIHead._refine_roi``) and runs it unchanged otherwise.
"""
import contextlib
import functools
import math
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

ORT_BACKEND = 'onnxruntime'
SDPA = 'torch.nn.functional.scaled_dot_product_attention'
ADAPTIVE_POOL = 'torch.nn.functional.adaptive_avg_pool2d'
CASCADE_PREDICT_BBOX = 'mmdet.models.roi_heads.cascade_roi_head.CascadeRoIHead.predict_bbox'


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Optional[Tensor] = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention`` in plain ops that the TorchScript exporter traces.

    Same signature and result as torch's (the reference implementation in its
    documentation): ``softmax(query @ key^T * scale + bias) @ value``.

    Args:
        query (Tensor): ``(..., Hq, L, E)``.
        key (Tensor): ``(..., Hk, S, E)``.
        value (Tensor): ``(..., Hk, S, Ev)``.
        attn_mask (Tensor, optional): bool (True: attend) or additive float, broadcastable
            to ``(..., Hq, L, S)``. Defaults to None.
        dropout_p (float): dropout on the attention weights (applied whenever > 0, as torch
            does). Defaults to 0.0.
        is_causal (bool): lower-triangular mask. Defaults to False.
        scale (float, optional): logit scale. Defaults to ``E ** -0.5``.
        enable_gqa (bool): ``Hq`` a multiple of ``Hk``; key / value heads are repeated.
            Defaults to False.

    Returns:
        Tensor: ``(..., Hq, L, Ev)``.
    """
    scale = 1. / math.sqrt(query.size(-1)) if scale is None else scale
    if enable_gqa:
        repeat = query.size(-3) // key.size(-3)
        key, value = key.repeat_interleave(repeat, -3), value.repeat_interleave(repeat, -3)
    logits = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool,
                          device=query.device).tril()
        logits = logits.masked_fill(~keep, float('-inf'))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            logits = logits.masked_fill(~attn_mask, float('-inf'))
        else:
            logits = logits + attn_mask
    weights = logits.softmax(dim=-1)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, True)
    return weights @ value


def _mean_windows(x: Tensor, out: int, dim: int) -> Tensor:
    """Mean over PyTorch's adaptive windows ``[floor(i * n / out), ceil((i + 1) * n / out))``
    along ``dim`` (of static length ``n``)."""
    n = int(x.size(dim))
    if n % out == 0:  # equal, disjoint windows: one reshape
        shape = list(x.shape)
        shape[dim:dim + 1] = [out, n // out]
        return x.reshape(shape).mean(dim + 1)
    parts = [x.narrow(dim, (i * n) // out, -(-(i + 1) * n // out) - (i * n) // out)
             .mean(dim, keepdim=True) for i in range(out)]
    return torch.cat(parts, dim)


def adaptive_avg_pool2d(input: Tensor, output_size: Union[int, Sequence[Optional[int]]]
                        ) -> Tensor:
    """``F.adaptive_avg_pool2d`` for static input sizes, in ops the exporter traces.

    Args:
        input (Tensor): ``(..., H, W)``.
        output_size (int | tuple): ``(h, w)`` or one int for both; None keeps that size.

    Returns:
        Tensor: ``(..., h, w)``.
    """
    size = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = (int(input.size(d)) if s is None else int(s) for d, s in zip((-2, -1), size))
    return _mean_windows(_mean_windows(input, h, input.dim() - 2), w, input.dim() - 1)


def cascade_roi_head_predict_bbox(self, x: Tuple[Tensor], batch_img_metas: List[dict],
                                  rpn_results_list: List[Tensor], rcnn_test_cfg,
                                  rescale: bool = False, **kwargs) -> List[Tensor]:
    """mmdeploy's ``CascadeRoIHead.predict_bbox`` rewriter, also for heads that regress per
    class: between stages, the deltas of each RoI's arg-max class (background excluded), as
    mmdet's ``CascadeRoIHead._refine_roi`` / ``BBoxHead.regress_by_class`` do.

    Args and returns: those of mmdet's ``CascadeRoIHead.predict_bbox`` under mmdeploy.
    """
    from mmdeploy.codebase.mmdet.models.roi_heads.cascade_roi_head import \
        cascade_roi_head__predict_bbox as mmdeploy_predict_bbox
    per_class = [i for i, head in enumerate(self.bbox_head[:-1])
                 if not head.reg_class_agnostic]
    forward = self._bbox_forward

    def bbox_forward(stage: int, feats, rois: Tensor, **kw) -> dict:
        results = forward(stage, feats, rois, **kw)
        if stage in per_class:
            deltas = results['bbox_pred']  # (RoIs, classes * 4)
            label = results['cls_score'][:, :-1].argmax(dim=1)
            deltas = deltas.reshape(deltas.size(0), -1, 4)
            deltas = deltas.gather(1, label[:, None, None].expand(-1, 1, 4)).squeeze(1)
            results = dict(results, bbox_pred=deltas)
        return results

    self._bbox_forward = bbox_forward  # this call only: the attribute is removed below
    for i in per_class:
        self.bbox_head[i].reg_class_agnostic = True
    try:
        return mmdeploy_predict_bbox(self, x, batch_img_metas, rpn_results_list,
                                     rcnn_test_cfg, rescale=rescale, **kwargs)
    finally:
        del self._bbox_forward
        for i in per_class:
            self.bbox_head[i].reg_class_agnostic = False


def _cast_long(g, value, non_blocking):
    """The removed ``torch.onnx.symbolic_opset9._cast_Long``: ONNX ``Cast`` to int64."""
    return g.op('Cast', value, to_i=torch._C._onnx.TensorProtoDataType.INT64)


@contextlib.contextmanager
def mmdeploy_compat() -> Iterator[None]:
    """Apply the fixes of this module; all are undone on exit, also on an error."""
    from mmdeploy.core import FUNCTION_REWRITER
    import torch.onnx.symbolic_opset9 as opset9

    export = torch.onnx.export

    @functools.wraps(export)
    def torchscript_export(*args, **kwargs):
        kwargs.setdefault('dynamo', False)
        return export(*args, **kwargs)

    added_cast = not hasattr(opset9, '_cast_Long')
    rewriters = {SDPA: scaled_dot_product_attention, ADAPTIVE_POOL: adaptive_avg_pool2d,
                 CASCADE_PREDICT_BBOX: cascade_roi_head_predict_bbox}
    for name, rewriter in rewriters.items():
        FUNCTION_REWRITER.register_rewriter(name, backend=ORT_BACKEND)(rewriter)
    torch.onnx.export = torchscript_export
    if added_cast:
        opset9._cast_Long = _cast_long
    try:
        yield
    finally:
        torch.onnx.export = export
        if added_cast:
            del opset9._cast_Long
        for rewriter in rewriters.values():
            FUNCTION_REWRITER._registry.remove_record(rewriter)
