#!/usr/bin/env python
"""Deploy an mmevt detector, segmentor or classifier with mmdeploy to ONNX Runtime.

Usage: python tools/deployment/deploy.py DEPLOY_CONFIG MODEL_CONFIG [CHECKPOINT] [--img IMG]
           [--work-dir DIR] [--overwrite] [--verify] [--benchmark ROUNDS] [--threads N]

DEPLOY_CONFIG is one of configs/deploy/ (ONNX Runtime, static H / W); see
mmevt/deploy/ (mmdeploy_export.py) and docs/deployment.md. Installed as the `mmevt-deploy`
command.
"""
from mmevt.deploy.cli import deploy_cli

if __name__ == '__main__':
    deploy_cli()
