"""``F.adaptive_avg_pool2d`` for the ONNX Runtime backend, with PyTorch's windows.

mmdeploy's rewriter of ``F.adaptive_avg_pool2d`` (``mmdeploy/pytorch/functions/
adaptive_pool.py``) replaces it by an ``avg_pool2d`` with kernel = stride =
``size // output``, which is the same only when the output size divides the input size:
UperNet's pyramid pooling (scales 1, 2, 3, 6) on the 16 x 16 stride-32 map of a 512 x 512
image gets 3 x 3 windows of 5 instead of PyTorch's overlapping windows of 6, and an 8 x 8 map
instead of 6 x 6. :func:`adaptive_avg_pool2d__onnxruntime` writes PyTorch's windows out for
the static sizes of the trace.
"""
from typing import Optional, Sequence, Union

import torch
from torch import Tensor

TARGET = 'torch.nn.functional.adaptive_avg_pool2d'


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


def adaptive_avg_pool2d__onnxruntime(input: Tensor,
                                     output_size: Union[int, Sequence[Optional[int]]]
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
