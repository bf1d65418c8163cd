"""What mmdeploy 1.3.1 needs from ``torch.onnx`` on torch >= 2.9: the TorchScript exporter by
default, and a helper torch removed. Both are context managers, undone on exit.

- **Exporter.** mmdeploy calls ``torch.onnx.export`` without ``dynamo=``, which since torch
  2.9 means the dynamo exporter (``torch.export``); mmdeploy's rewriters are written for the
  TorchScript tracer and fail under it (``TorchExportError ... data is not allocated yet`` in
  mmdeploy's ``single_stage.py``). Inside :func:`torchscript_exporter`, ``torch.onnx.export``
  defaults to ``dynamo=False``, the TorchScript exporter, which torch 2.14 still ships.
- **Removed helper.** mmdeploy's RoIAlign symbolic (Mask R-CNN, Cascade Mask R-CNN) imports
  ``torch.onnx.symbolic_opset9._cast_Long``, which torch removed; :func:`cast_long_symbolic`
  provides it (an ONNX ``Cast`` to int64, what torch's helper emitted).
"""
import contextlib
import functools
from typing import Iterator

import torch


@contextlib.contextmanager
def torchscript_exporter() -> Iterator[None]:
    """``torch.onnx.export`` with ``dynamo=False`` unless the caller passes ``dynamo``."""
    export = torch.onnx.export

    @functools.wraps(export)
    def torchscript_export(*args, **kwargs):
        kwargs.setdefault('dynamo', False)
        return export(*args, **kwargs)

    torch.onnx.export = torchscript_export
    try:
        yield
    finally:
        torch.onnx.export = export


def _cast_long(g, value, non_blocking):
    """The removed ``torch.onnx.symbolic_opset9._cast_Long``: ONNX ``Cast`` to int64."""
    return g.op('Cast', value, to_i=torch._C._onnx.TensorProtoDataType.INT64)


@contextlib.contextmanager
def cast_long_symbolic() -> Iterator[None]:
    """``torch.onnx.symbolic_opset9._cast_Long`` where this torch has none."""
    import torch.onnx.symbolic_opset9 as opset9
    added = not hasattr(opset9, '_cast_Long')
    if added:
        opset9._cast_Long = _cast_long
    try:
        yield
    finally:
        if added:
            del opset9._cast_Long
