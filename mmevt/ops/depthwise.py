"""Depth-wise convs of channels-last tensors (EVT's CPE, LePE and FFN conv) and their
gradients, computed the fast way on each device.

Two things make the plain autograd of these convs slow on a CPU, and both are done
differently here, with the same result to rounding:

- **The residual.** CPE and the FFN conv are ``x + DWConv(x)``. That is one conv whose
  kernel has 1 added at its centre tap (:func:`residual_kernel`), so the residual costs no
  pass over the tensor: not the add in the forward pass, nor the gradient's add in the
  backward pass.
- **The weight gradient of a 5 x 5 kernel.** oneDNN's depth-wise weight gradient is fast
  for 3 x 3 kernels only: for LePE's 5 x 5 one on stage 1 of a detection-size image it
  took about 3x as long as four 3 x 3 weight gradients that cover its 25 taps
  (:func:`dwconv_weight_grad`; torch 2.14 on the project's 2-core AMD EPYC). On CUDA the
  plain kernel is used.

:func:`dwconv` is the conv with that backward pass (``DWConv2d`` runs it in training);
:func:`dwconv_grads` the backward pass itself, also called by the ops of
:mod:`~mmevt.ops.recompute`, which rebuild their convs (CPE and the FFN's, with their
residuals) in their own backward passes.
"""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

# below this many tokens a grid is too small for the split weight gradient to pay
_SPLIT_MIN_TOKENS = 1024


def residual_kernel(weight: Tensor) -> Tensor:
    """``weight`` of a depth-wise conv ``(C, 1, k, k)`` with 1 added at its centre tap: the
    conv of the result is ``x + DWConv(x)``."""
    k = weight.shape[-1]
    eye = torch.zeros_like(weight[0, 0])
    eye[k // 2, k // 2] = 1
    return weight + eye


def conv_nhwc(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """The depth-wise conv (stride 1, padding ``k // 2``) of a channels-last tensor, run
    as is (under autocast, in autocast's dtype). ``(B, H, W, C) -> (B, H, W, C)``."""
    out = F.conv2d(x.permute(0, 3, 1, 2), weight, bias, 1, weight.shape[-1] // 2, 1,
                   x.shape[-1])
    return out.permute(0, 2, 3, 1)


def conv_dtype(x: Tensor) -> torch.dtype:
    """The dtype a conv of ``x`` runs in: autocast's where it is on, else ``x``'s."""
    # devices without autocast (``meta``, used for shapes and counting) raise on the query
    if (torch.amp.is_autocast_available(x.device.type)
            and torch.is_autocast_enabled(x.device.type)):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


def residual_conv(x: Tensor, weight: Tensor, bias: Optional[Tensor],
                  x_conv: Optional[Tensor] = None) -> Tensor:
    """``x + conv_nhwc(x, weight, bias)`` with the conv run on ``x_conv``, ``x`` in the
    dtype the conv runs in (see :func:`conv_dtype`; a caller that needs that cast again
    passes it in). Where that is ``x``'s dtype, one conv with kernel
    :func:`residual_kernel`; otherwise the conv and then the add, so that the sum keeps
    ``x``'s dtype (a residual stream is not rounded to bf16).

    Args:
        x (Tensor): shape ``(B, H, W, C)``.
        weight, bias (Tensor): the depth-wise conv, ``(C, 1, k, k)`` and ``(C,)`` or None.
        x_conv (Tensor, optional): ``x`` cast to the conv's dtype. Defaults to ``x``.

    Returns:
        Tensor: shape ``(B, H, W, C)``, ``x``'s dtype.
    """
    xc = x if x_conv is None else x_conv
    b = None if bias is None else bias.to(xc.dtype)
    if xc.dtype == x.dtype:
        return conv_nhwc(x, residual_kernel(weight).to(x.dtype), b)
    return x + conv_nhwc(xc, weight.to(xc.dtype), b)


def _split_pays(x: Tensor, k: int) -> bool:
    """Whether :func:`dwconv_weight_grad` splits the kernel: on a CPU, for kernels over
    3 x 3, on grids of at least ``_SPLIT_MIN_TOKENS`` tokens; under ``torch.compile`` at
    every size (a branch on the size would make the graph guard on it and trace again for
    sizes on the other side)."""
    if x.device.type != 'cpu' or k <= 3:
        return False
    return torch.compiler.is_compiling() or x.shape[1] * x.shape[2] >= _SPLIT_MIN_TOKENS


def dwconv_weight_grad(d_out: Tensor, x: Tensor, kernel_size: int) -> Tensor:
    """The gradient of a depth-wise conv's weight ``(C, 1, k, k)`` (stride 1, padding
    ``k // 2``) from its input ``x`` and output gradient ``d_out``, both ``(B, H, W, C)``.

    Where it pays (:func:`_split_pays`), from 3 x 3 pieces: the taps
    ``[r, r + 3) x [c, c + 3)`` are the weight gradient of a 3 x 3 conv without padding on
    the crop of the padded input starting at ``(r, c)``; the pieces cover the kernel
    (overlapping where ``k`` is not a multiple of 3).
    """
    k, c = kernel_size, x.shape[-1]
    g = d_out.permute(0, 3, 1, 2)
    if not _split_pays(x, k):
        return torch.ops.aten.convolution_backward(
            g, x.permute(0, 3, 1, 2), x.new_empty(c, 1, k, k), None, [1, 1], [k // 2] * 2,
            [1, 1], False, [0, 0], c, [False, True, False])[1]
    h, w, p = x.shape[1], x.shape[2], k // 2
    xp = F.pad(x, (0, 0, p, p, p, p))
    starts = sorted({min(s, k - 3) for s in range(0, k, 3)})
    out = x.new_empty(c, 1, k, k)
    w3 = x.new_empty(c, 1, 3, 3)
    for r in starts:
        for s in starts:
            crop = xp[:, r:r + h + 2, s:s + w + 2].permute(0, 3, 1, 2)
            out[:, :, r:r + 3, s:s + 3] = torch.ops.aten.convolution_backward(
                g, crop, w3, None, [1, 1], [0, 0], [1, 1], False, [0, 0], c,
                [False, True, False])[1]
    return out


def dwconv_grads(d_out: Tensor, x: Tensor, weight: Tensor, need: Tuple[bool, bool, bool],
                 residual: bool = False) -> List[Optional[Tensor]]:
    """``(d x, d weight, d bias)`` of :func:`conv_nhwc` ``(x, weight, bias)`` (with
    ``residual``: of ``x + conv``), run in ``x``'s dtype, each in its own tensor's dtype
    (None where ``need`` says no).

    Args:
        d_out (Tensor): the output's gradient, ``(B, H, W, C)``.
        x (Tensor): the conv's input, ``(B, H, W, C)``, in the dtype the conv ran in.
        weight (Tensor): ``(C, 1, k, k)``.
        need (tuple[bool, bool, bool]): which gradients to compute.
        residual (bool): the op was ``x + conv(x)``. Defaults to False.
    """
    dt, k = x.dtype, weight.shape[-1]
    g = d_out.to(dt)
    d_x = d_w = d_b = None
    if need[0]:
        w = (residual_kernel(weight) if residual else weight).to(dt)
        d_x = torch.ops.aten.convolution_backward(
            g.permute(0, 3, 1, 2), x.permute(0, 3, 1, 2), w, None, [1, 1], [k // 2] * 2,
            [1, 1], False, [0, 0], weight.shape[0], [True, False, False])[0]
        d_x = d_x.permute(0, 2, 3, 1)
    if need[1]:
        d_w = dwconv_weight_grad(g, x, k).to(weight.dtype)
    if need[2]:
        d_b = g.sum((0, 1, 2), dtype=torch.float32).to(weight.dtype)
    return [d_x, d_w, d_b]


class _DWConv(torch.autograd.Function):
    """:func:`dwconv` with :func:`dwconv_grads` as its backward pass."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        out = conv_nhwc(x, weight, bias)
        # the input as the conv read it (autocast's dtype; x itself otherwise)
        ctx.save_for_backward(x.to(out.dtype), weight)
        ctx.dtypes = (x.dtype, None if bias is None else bias.dtype)
        return out

    @staticmethod
    def backward(ctx, grad):
        xs, weight = ctx.saved_tensors
        need = ctx.needs_input_grad
        d_x, d_w, d_b = dwconv_grads(grad, xs, weight,
                                     (need[0], need[1], need[2] and ctx.dtypes[1] is not None))
        return (None if d_x is None else d_x.to(ctx.dtypes[0]), d_w,
                None if d_b is None else d_b.to(ctx.dtypes[1]))


def dwconv(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """Depth-wise conv (stride 1, padding ``k // 2``) of a channels-last tensor, whose
    backward pass is :func:`dwconv_grads` (the fast weight gradient).

    For training: exporters and inference run the plain conv (``DWConv2d`` does).

    Args:
        x (Tensor): shape ``(B, H, W, C)``.
        weight (Tensor): shape ``(C, 1, k, k)``, odd ``k``.
        bias (Tensor, optional): shape ``(C,)``.

    Returns:
        Tensor: shape ``(B, H, W, C)``.
    """
    return _DWConv.apply(x, weight, bias)


__all__ = ['conv_dtype', 'conv_nhwc', 'dwconv', 'dwconv_grads', 'dwconv_weight_grad',
           'residual_conv', 'residual_kernel']
