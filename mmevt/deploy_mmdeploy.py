"""Moved to :mod:`mmevt.deploy` (:mod:`mmevt.deploy.mmdeploy_export`); an alias for one release."""
from .deploy.cli import deploy_cli as cli
from .deploy.cli import deploy_main as main
from .deploy.cli import parse_deploy_args as parse_args
from .deploy.mmdeploy_export import check_configs, default_image, load_configs
from .deploy.mmdeploy_export import export_mmdeploy as export
from .deploy.parity import (TOLERANCES, Reference, check_parity, compare, copy_samples,
                            read_images, run_onnx)
from .deploy.parity import verify_mmdeploy as verify
from .deploy.shapes import MMDEPLOY_DYNAMIC_HW_ERROR as DYNAMIC_HW_ERROR
from .deploy.timing import time_predict as benchmark

__all__ = ['DYNAMIC_HW_ERROR', 'TOLERANCES', 'Reference', 'benchmark', 'check_configs',
           'check_parity', 'cli', 'compare', 'copy_samples', 'default_image', 'export',
           'load_configs', 'main', 'parse_args', 'read_images', 'run_onnx', 'verify']

if __name__ == '__main__':
    cli()
