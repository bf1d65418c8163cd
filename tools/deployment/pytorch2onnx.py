#!/usr/bin/env python
"""Export an mmevt classifier, backbone (--backbone-only) or segmentor to ONNX.

Usage: python tools/deployment/pytorch2onnx.py CONFIG [CHECKPOINT] --shape H W [--shape H W]
           [--backbone-only] [--out-dir DIR] [--overwrite] [--verify] [--benchmark ROUNDS]

One file per input size, each with a dynamic batch; see mmevt/deploy/ (onnx_export.py) and
docs/deployment.md. Installed as the `mmevt-onnx` command.
"""
from mmevt.deploy.cli import onnx_cli

if __name__ == '__main__':
    onnx_cli()
