"""Moved to :mod:`mmevt.deploy` (:mod:`mmevt.deploy.onnx_export`); an alias for one release."""
from .deploy.cli import onnx_cli as cli
from .deploy.cli import onnx_main as main
from .deploy.cli import parse_onnx_args as parse_args
from .deploy.onnx_export import (TensorMode, default_name, export_onnx, load_model,
                                 output_names)
from .deploy.parity import verify_onnx
from .deploy.shapes import MIN_SIZE, check_shape
from .deploy.shapes import ONNX_DYNAMIC_HW_ERROR as DYNAMIC_HW_ERROR
from .deploy.timing import time_against_onnxruntime
from .deploy.timing import time_tensor_mode as benchmark

__all__ = ['DYNAMIC_HW_ERROR', 'MIN_SIZE', 'TensorMode', 'benchmark', 'check_shape', 'cli',
           'default_name', 'export_onnx', 'load_model', 'main', 'output_names', 'parse_args',
           'time_against_onnxruntime', 'verify_onnx']

if __name__ == '__main__':
    cli()
