"""What mmdeploy 1.3.1 needs to export on torch >= 2.9, applied only while our deploy tool runs.

mmdeploy 1.3.1 was written for torch 1.x / 2.0; on this project's torch (2.14.1) its
``torch2onnx`` fails for every model, and for some of ours it exports wrong numbers. One
entry point, :func:`mmdeploy_compat`, applies five things and undoes each on exit (nothing
in site-packages is changed), one module per target, each explaining its fix:

- :mod:`.torch_onnx`: ``torch.onnx.export`` defaults to the TorchScript exporter
  (``dynamo=False``), and the removed ``torch.onnx.symbolic_opset9._cast_Long`` is provided;
- rewriters registered with mmdeploy's ``FUNCTION_REWRITER`` for the ONNX Runtime backend
  (mmdeploy picks a backend-specific rewriter over its default one), named
  ``<target>__<backend>`` as mmdeploy names its own (:data:`REWRITERS`):

  - :mod:`.scaled_dot_product_attention`: ``F.scaled_dot_product_attention`` with torch's
    scale (mmdeploy's divides by it);
  - :mod:`.adaptive_pool`: ``F.adaptive_avg_pool2d`` with PyTorch's windows (mmdeploy's is
    wrong when the output size does not divide the input size);
  - :mod:`.cascade_roi_head`: ``CascadeRoIHead.predict_bbox`` also for heads that regress
    per class (mmdeploy's asserts class-agnostic regression).

Listed with the other patches of other libraries in :data:`mmevt.patches.PATCHES`.
"""
import contextlib
from typing import Callable, Dict, Iterator

from . import adaptive_pool, cascade_roi_head, scaled_dot_product_attention
from .adaptive_pool import adaptive_avg_pool2d__onnxruntime
from .cascade_roi_head import cascade_roi_head__predict_bbox__onnxruntime
from .scaled_dot_product_attention import scaled_dot_product_attention__onnxruntime
from .torch_onnx import cast_long_symbolic, torchscript_exporter

BACKEND = 'onnxruntime'
# the function mmdeploy rewrites (its import path) -> ours, for BACKEND
REWRITERS: Dict[str, Callable] = {
    scaled_dot_product_attention.TARGET: scaled_dot_product_attention__onnxruntime,
    adaptive_pool.TARGET: adaptive_avg_pool2d__onnxruntime,
    cascade_roi_head.TARGET: cascade_roi_head__predict_bbox__onnxruntime,
}


@contextlib.contextmanager
def registered_rewriters() -> Iterator[None]:
    """:data:`REWRITERS` in mmdeploy's ``FUNCTION_REWRITER`` for :data:`BACKEND`."""
    from mmdeploy.core import FUNCTION_REWRITER
    for target, rewriter in REWRITERS.items():
        FUNCTION_REWRITER.register_rewriter(target, backend=BACKEND)(rewriter)
    try:
        yield
    finally:
        for rewriter in REWRITERS.values():
            FUNCTION_REWRITER._registry.remove_record(rewriter)


@contextlib.contextmanager
def mmdeploy_compat() -> Iterator[None]:
    """Apply the fixes of this package; all are undone on exit, also on an error."""
    with registered_rewriters(), torchscript_exporter(), cast_long_symbolic():
        yield


__all__ = ['BACKEND', 'REWRITERS', 'mmdeploy_compat', 'registered_rewriters',
           'torchscript_exporter', 'cast_long_symbolic',
           'scaled_dot_product_attention__onnxruntime', 'adaptive_avg_pool2d__onnxruntime',
           'cascade_roi_head__predict_bbox__onnxruntime']
