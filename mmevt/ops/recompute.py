"""Ops of a block that save little for the backward pass and recompute cheap work there.

Run op by op, autograd keeps every intermediate a backward kernel reads. Two ops here keep
less and rebuild the rest in the backward pass, from cheap elementwise work only (a
LayerNorm, a GELU, a depth-wise conv; the linears are never run again):

- :func:`norm_linears`, ``x + CPE(x)``, ``LN`` of it and the linears that follow (the
  attention's q, k, v): saves the block's input ``x`` only, not the residual after the
  conv nor the normalised tensor;
- :func:`norm_conv_ffn`, the FFN branch ``y = LN(x); h0 = fc1(y); a = GELU(h0);
  h = a + DWConv3x3(a); out = fc2(h)``: saves ``x`` and ``h0``, where autograd keeps ``x``,
  ``y`` and three hidden-width tensors (GELU's, the conv's and fc2's inputs).

The gradients are the plain computation's to rounding: the backward passes call the aten
backward kernels autograd would (``native_layer_norm_backward``, ``gelu_backward``), in the
dtypes autocast gave the forward pass; the depth-wise convs and their residuals run as
:mod:`~mmevt.ops.depthwise` runs them (``x + DWConv(x)`` as one conv, the fast weight
gradient). Tensors are channels-last, ``(B, H, W, C)``.
"""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .depthwise import conv_dtype, dwconv_grads, residual_conv


def _hidden(h0: Tensor, dw_weight: Optional[Tensor], dw_bias: Optional[Tensor]
            ) -> Tuple[Tensor, Tensor]:
    """GELU's output ``a`` and fc2's input ``h = a + DWConv3x3(a)`` (one conv, in ``a``'s
    dtype, as autocast runs it) from fc1's output ``h0``."""
    a = F.gelu(h0)
    return a, (a if dw_weight is None else residual_conv(a, dw_weight, dw_bias))


def _linear_grads(grad: Tensor, inp: Tensor, weight: Tensor, bias: Optional[Tensor],
                  need: Tuple[bool, bool, bool]) -> List[Optional[Tensor]]:
    """``(d inp, d weight, d bias)`` of ``F.linear(inp, weight, bias)`` run in ``grad``'s
    dtype, each in its own tensor's dtype (None where ``need`` says no)."""
    g2 = grad.reshape(-1, grad.shape[-1])
    d_inp = d_w = d_b = None
    if need[0]:
        d_inp = (grad @ weight.to(grad.dtype)).to(inp.dtype)
    if need[1]:
        d_w = (g2.t() @ inp.reshape(-1, inp.shape[-1]).to(grad.dtype)).to(weight.dtype)
    if need[2] and bias is not None:
        d_b = g2.sum(0).to(bias.dtype)
    return [d_inp, d_w, d_b]


def _norm(x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor],
          eps: Optional[float]) -> Tensor:
    """The pre-norm (None ``eps``: none)."""
    return x if eps is None else F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def _norm_grads(ctx, d_y: Optional[Tensor], x: Tensor, weight: Optional[Tensor],
                bias: Optional[Tensor], need: Tuple[bool, bool, bool]) -> list:
    """``(d x, d weight, d bias)`` of the pre-norm, from the gradient of its output."""
    if ctx.eps is None:  # no norm: the output is x itself
        return [d_y, None, None]
    dt = ctx.y_dtype  # the dtype the norm ran in (autocast runs it in fp32)
    xn = x.to(dt)
    w, b = (None if t is None else t.to(dt) for t in (weight, bias))
    _, mean, rstd = torch.native_layer_norm(xn, x.shape[-1:], w, b, ctx.eps)
    grads = torch.ops.aten.native_layer_norm_backward(
        d_y.to(dt), xn, x.shape[-1:], mean, rstd, w, b,
        [need[0], need[1] and w is not None, need[2] and b is not None])
    return [None if g is None else g.to(t.dtype) for g, t in zip(grads, (x, weight, bias))]


def _recompute_norm(ctx, x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor]
                    ) -> Tensor:
    """The pre-norm's output again, in the dtype it had in the forward pass."""
    if ctx.eps is None:
        return x
    dt = ctx.y_dtype
    return F.layer_norm(x.to(dt), x.shape[-1:], *(None if t is None else t.to(dt)
                                                  for t in (weight, bias)), ctx.eps)


class _NormLinears(torch.autograd.Function):
    """:func:`norm_linears` with its own backward pass (saves ``x`` only)."""

    @staticmethod
    def forward(ctx, x, cpe_weight, cpe_bias, norm_weight, norm_bias, eps, *linears):
        x1 = x
        if cpe_weight is not None:  # x + CPE(x), in the dtype autocast runs the conv in
            ctx.conv_dtype = conv_dtype(x)
            x1 = residual_conv(x, cpe_weight, cpe_bias, x.to(ctx.conv_dtype))
        y = _norm(x1, norm_weight, norm_bias, eps)
        outs = tuple(F.linear(y, w, b) for w, b in zip(linears[::2], linears[1::2]))
        ctx.save_for_backward(x, cpe_weight, cpe_bias, norm_weight, norm_bias, *linears)
        ctx.eps, ctx.y_dtype = eps, y.dtype
        return ((x1, ) if cpe_weight is not None else ()) + outs

    @staticmethod
    def backward(ctx, *grads):
        x, cw, cb, nw, nb, *linears = ctx.saved_tensors
        need = ctx.needs_input_grad
        x1 = x
        if cw is not None:  # the recomputed residual, as the forward pass made it
            x_conv = x.to(ctx.conv_dtype)  # cast once: the conv and its gradients read it
            x1 = residual_conv(x, cw, cb, x_conv)
            d_x1_out, *grads = grads
        y = _recompute_norm(ctx, x1, nw, nb)
        d_y, d_linears = None, []
        for i, grad in enumerate(grads):
            w, b = linears[2 * i:2 * i + 2]
            d_in, d_w, d_b = _linear_grads(grad, y, w, b,
                                           (True, need[6 + 2 * i], need[7 + 2 * i]))
            d_y = d_in if d_y is None else d_y + d_in
            d_linears += [d_w, d_b]
        d_x, d_nw, d_nb = _norm_grads(ctx, d_y, x1, nw, nb, (True, need[3], need[4]))
        d_cw = d_cb = None
        if cw is not None:  # through x1 = x + CPE(x), one conv where it ran as one
            d_x1 = d_x + d_x1_out
            folded = ctx.conv_dtype == x.dtype
            d_conv, d_cw, d_cb = dwconv_grads(d_x1, x_conv, cw,
                                              (need[0], need[1], need[2]), residual=folded)
            if need[0]:
                d_x = d_conv.to(d_x1.dtype) if folded else d_x1 + d_conv.to(d_x1.dtype)
        return (d_x if need[0] else None, d_cw, d_cb, d_nw, d_nb, None, *d_linears)


class _NormConvFFN(torch.autograd.Function):
    """:func:`norm_conv_ffn` with its own backward pass (saves ``x`` and ``h0`` only)."""

    @staticmethod
    def forward(ctx, x, norm_weight, norm_bias, eps, fc1_weight, fc1_bias, dw_weight,
                dw_bias, fc2_weight, fc2_bias, scale):
        y = _norm(x, norm_weight, norm_bias, eps)
        h0 = F.linear(y, fc1_weight, fc1_bias)
        _, h = _hidden(h0, dw_weight, dw_bias)
        out = F.linear(h, fc2_weight, fc2_bias)
        ctx.save_for_backward(x, h0, norm_weight, norm_bias, fc1_weight, fc1_bias,
                              dw_weight, dw_bias, fc2_weight, fc2_bias, scale)
        ctx.eps, ctx.y_dtype = eps, y.dtype
        return out if scale is None else out * scale

    @staticmethod
    def backward(ctx, grad):
        x, h0, nw, nb, w1, b1, dw, db, w2, b2, scale = ctx.saved_tensors
        need = ctx.needs_input_grad
        dt = h0.dtype  # the dtype the linears ran in (autocast's, or the input's)
        a, h = _hidden(h0, dw, db)  # the recomputed part
        d_scale = None
        if scale is None:
            d_h, d_w2, d_b2 = _linear_grads(grad.to(dt), h, w2, b2, (True, need[8], need[9]))
        else:  # out * scale: its gradient from fc2's weight gradient, not from a saved out
            d_h = _linear_grads((grad * scale).to(dt), h, w2, b2, (True, False, False))[0]
            _, m, g_sum = _linear_grads(grad.to(dt), h, w2, b2, (False, True, True))
            d_w2 = m * scale[:, None].to(m.dtype) if need[8] else None
            d_b2 = g_sum * scale.to(g_sum.dtype) if need[9] and b2 is not None else None
            if need[10]:
                d_scale = (m * w2).sum(1) + (0 if b2 is None else g_sum * b2)
                d_scale = d_scale.to(scale.dtype)
        d_dw = d_db = None
        d_a = d_h
        if dw is not None:  # through h = a + DWConv(a), one conv
            d_a, d_dw, d_db = dwconv_grads(d_h, a, dw, (True, need[6], need[7]),
                                           residual=True)
        d_h0 = torch.ops.aten.gelu_backward(d_a, h0)
        y = _recompute_norm(ctx, x, nw, nb)
        d_y, d_w1, d_b1 = _linear_grads(d_h0, y, w1, b1, (True, need[4], need[5]))
        return (*_norm_grads(ctx, d_y, x, nw, nb, need[:3]), None, d_w1, d_b1, d_dw, d_db,
                d_w2, d_b2, d_scale)


def training_op_active(*tensors: Tensor) -> bool:
    """Whether a training op (one with its own backward pass: these ops,
    :func:`~mmevt.ops.depthwise.dwconv`) should run instead of the plain layers: a
    backward pass can follow (grad mode on, some input needs a gradient), and no exporter
    is tracing the model (ONNX and TorchScript record the plain ops)."""
    if not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors):
        return False
    return not (torch.jit.is_tracing() or torch.onnx.is_in_onnx_export())


def norm_conv_ffn(x: Tensor, norm_weight: Optional[Tensor], norm_bias: Optional[Tensor],
                  eps: Optional[float], fc1_weight: Tensor, fc1_bias: Optional[Tensor],
                  dw_weight: Optional[Tensor], dw_bias: Optional[Tensor],
                  fc2_weight: Tensor, fc2_bias: Optional[Tensor],
                  scale: Optional[Tensor] = None) -> Tensor:
    """``fc2(a + DWConv(a)) * scale`` with ``a = GELU(fc1(LN(x)))`` (without the conv:
    ``fc2(a)``), saving ``x`` and fc1's output only for the backward pass, which rebuilds
    the rest (the scale's gradient comes from fc2's weight gradient, so fc2's output is
    not kept either).

    For training: under ONNX or TorchScript tracing run the plain layers instead (the
    module does: :func:`training_op_active`).

    Args:
        x (Tensor): shape ``(B, H, W, C)``.
        norm_weight, norm_bias (Tensor, optional): the LayerNorm's affine, shape ``(C,)``.
        eps (float, optional): the LayerNorm's eps; None: no LayerNorm (``fc1(x)``).
        fc1_weight, fc1_bias (Tensor): shape ``(C_h, C)``, ``(C_h,)``.
        dw_weight, dw_bias (Tensor, optional): the depth-wise conv, shape
            ``(C_h, 1, k, k)`` (odd ``k``, padding ``k // 2``), ``(C_h,)``; None: no conv.
        fc2_weight, fc2_bias (Tensor): shape ``(C_out, C_h)``, ``(C_out,)``.
        scale (Tensor, optional): per-channel scale of the output (layer scale), shape
            ``(C_out,)``. Defaults to None.

    Returns:
        Tensor: shape ``(B, H, W, C_out)``.
    """
    return _NormConvFFN.apply(x, norm_weight, norm_bias, eps, fc1_weight, fc1_bias,
                              dw_weight, dw_bias, fc2_weight, fc2_bias, scale)


def norm_linears(x: Tensor, norm_weight: Optional[Tensor], norm_bias: Optional[Tensor],
                 eps: Optional[float], *linears: Optional[Tensor],
                 cpe: Tuple[Optional[Tensor], Optional[Tensor]] = (None, None)
                 ) -> Tuple[Tensor, ...]:
    """``F.linear(LN(x), w_i, b_i)`` for each pair, saving ``x`` (not ``LN(x)``) for the
    backward pass, which normalises again. With ``cpe``, ``x`` is first replaced by
    ``x + DWConv(x)`` (the block's conv position encoding), returned first, and rebuilt
    in the backward pass too (only the block's input is kept).

    For training: under ONNX or TorchScript tracing run the plain layers instead
    (:func:`training_op_active`).

    Args:
        x (Tensor): shape ``(..., C)``.
        norm_weight, norm_bias (Tensor, optional): the LayerNorm's affine, shape ``(C,)``.
        eps (float, optional): the LayerNorm's eps; None: no LayerNorm.
        *linears (Tensor): ``w_0, b_0, w_1, b_1, ...``, each ``w_i`` of shape
            ``(C_i, C)``, ``b_i`` of ``(C_i,)`` or None.
        cpe (tuple[Tensor, Tensor]): the depth-wise conv's weight ``(C, 1, k, k)`` and
            bias ``(C,)`` (``x`` channels-last, ``(B, H, W, C)``); None: no conv.
            Defaults to ``(None, None)``.

    Returns:
        tuple[Tensor, ...]: with ``cpe`` ``x + DWConv(x)`` first; one output per linear,
        shape ``(..., C_i)``.
    """
    return _NormLinears.apply(x, *cpe, norm_weight, norm_bias, eps, *linears)


__all__ = ['norm_conv_ffn', 'norm_linears', 'training_op_active']
