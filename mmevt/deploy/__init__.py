"""Deployment of mmevt models to ONNX, checked against PyTorch and timed in onnxruntime.

Where a change goes:

- :mod:`.shapes`: input sizes; why exported graphs have static H and W (explained there
  once), the size checks and the dynamic-H / W errors;
- :mod:`.onnx_export`: torch's own exporter for classifiers, backbones and segmentors
  (``mmevt-onnx``): :func:`load_model`, :func:`export_onnx`;
- :mod:`.mmdeploy_export`: mmdeploy to ONNX Runtime for every family (``mmevt-deploy``):
  :func:`load_configs`, :func:`export_mmdeploy`;
- :mod:`.rewriters`: what mmdeploy 1.3.1 needs on torch >= 2.9, one module per target,
  applied by the one context manager :func:`mmdeploy_compat`;
- :mod:`.parity`: onnxruntime against PyTorch (:func:`verify_onnx`,
  :func:`verify_mmdeploy`, :data:`TOLERANCES`, detection matching);
- :mod:`.timing`: the onnxruntime-vs-PyTorch timer and what each tool times with it
  (:func:`time_tensor_mode`, :func:`time_predict`);
- :mod:`.cli`: the two command lines (``tools/deployment/pytorch2onnx.py``,
  ``tools/deployment/deploy.py``).

Nothing here imports mmdeploy, onnx or onnxruntime until a function needs them.
"""
from .mmdeploy_export import check_configs, export_mmdeploy, load_configs
from .onnx_export import TensorMode, export_onnx, load_model
from .parity import TOLERANCES, Reference, compare, verify_mmdeploy, verify_onnx
from .rewriters import mmdeploy_compat
from .shapes import MMDEPLOY_DYNAMIC_HW_ERROR, ONNX_DYNAMIC_HW_ERROR, check_shape
from .timing import time_against_onnxruntime, time_predict, time_tensor_mode

__all__ = [
    'ONNX_DYNAMIC_HW_ERROR', 'MMDEPLOY_DYNAMIC_HW_ERROR', 'check_shape', 'TensorMode',
    'load_model', 'export_onnx', 'load_configs', 'check_configs', 'export_mmdeploy',
    'mmdeploy_compat', 'TOLERANCES', 'Reference', 'compare', 'verify_onnx', 'verify_mmdeploy',
    'time_against_onnxruntime', 'time_tensor_mode', 'time_predict'
]
