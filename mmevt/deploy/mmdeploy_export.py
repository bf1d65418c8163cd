"""Deployment of an mmevt detector, segmentor or classifier with mmdeploy to ONNX Runtime.

What ``mmevt-deploy`` (``tools/deployment/deploy.py``, :func:`mmevt.deploy.cli.deploy_main`)
runs: mmdeploy's own ``torch2onnx`` (its rewriters: ONNX ``NonMaxSuppression`` for the
detectors' post-processing, ``RoiAlign`` for the RoI heads, argmax for segmentors, softmax
for classifiers) inside :func:`mmevt.deploy.rewriters.mmdeploy_compat`, which makes mmdeploy
1.3.1 work on torch >= 2.9. The deploy configs are ours (``configs/deploy/``): ONNX Runtime,
static H / W (:mod:`mmevt.deploy.shapes` says why), a dynamic batch only for classification.
mmdeploy builds the model (its task processor); the comparison with PyTorch is
:func:`mmevt.deploy.parity.verify_mmdeploy`.
"""
import os
import os.path as osp
import shutil
import tempfile
from typing import Optional, Tuple

import torch

from ..toolkits import config_toolkit, get_toolkit
from .rewriters import mmdeploy_compat
from .shapes import MMDEPLOY_DYNAMIC_HW_ERROR, check_deploy_input_shape


def default_image() -> str:
    """The photograph used when no ``--img`` is given: matplotlib's ``grace_hopper.jpg``."""
    from ..utils.sample_images import sample_photo_path
    return sample_photo_path()


def load_configs(deploy_config: str, model_config: str,
                 cfg_options: Optional[dict] = None) -> Tuple[object, object]:
    """Read and check a deploy config and a model config.

    Args:
        deploy_config (str): an ONNX Runtime deploy config (``configs/deploy/``).
        model_config (str): an mmdet, mmseg or mmpretrain config of ours (or any config
            whose ``custom_imports`` load mmevt).
        cfg_options (dict, optional): overrides merged into the model config. Defaults to
            None.

    Returns:
        tuple: ``(deploy_cfg, model_cfg)`` as mmengine ``Config``.

    Raises:
        FileNotFoundError: a config file does not exist.
        ValueError: the pair cannot be deployed (see :func:`check_configs`).
    """
    for path in (deploy_config, model_config):
        if not osp.isfile(path):
            raise FileNotFoundError(f'config file {path!r} does not exist')
    import mmevt  # noqa: F401  registers EVT; mmevt:: bases resolve
    from mmdeploy.utils import load_config
    deploy_cfg, model_cfg = load_config(deploy_config, model_config)
    if cfg_options:
        model_cfg.merge_from_dict(cfg_options)
    check_configs(deploy_cfg, model_cfg)
    return deploy_cfg, model_cfg


def check_configs(deploy_cfg, model_cfg) -> None:
    """Raise ``ValueError`` naming the bad value when the pair cannot be deployed here.

    Checked: ONNX Runtime backend and ONNX IR; the deploy config's codebase is the model
    config's toolkit; no dynamic H / W; ``input_shape`` two integers >= 32; detectors with a
    mask head use an instance-segmentation config (``masks`` output) and only they do.
    """
    from mmdeploy.utils import (get_backend, get_codebase, get_ir_config, get_input_shape,
                                is_dynamic_shape)
    backend = get_backend(deploy_cfg).value
    if backend != 'onnxruntime':
        raise ValueError(f"backend_config.type must be 'onnxruntime', got {backend!r}")
    ir = get_ir_config(deploy_cfg).get('type')
    if ir != 'onnx':
        raise ValueError(f"onnx_config.type must be 'onnx', got {ir!r}")
    scope = config_toolkit(model_cfg, 'the model config')
    codebase = get_codebase(deploy_cfg).value
    if codebase != scope:
        raise ValueError(f'the deploy config is for {codebase!r} (codebase_config.type) but '
                         f'the model config is an {scope!r} config')
    if is_dynamic_shape(deploy_cfg):
        raise ValueError(MMDEPLOY_DYNAMIC_HW_ERROR)
    check_deploy_input_shape(get_input_shape(deploy_cfg))
    get_toolkit(scope).check_deploy_outputs(model_cfg,
                                            get_ir_config(deploy_cfg)['output_names'])


def export_mmdeploy(deploy_cfg, model_cfg, checkpoint: Optional[str], img: str,
                    work_dir: str, overwrite: bool = False, seed: int = 0) -> str:
    """mmdeploy's ``torch2onnx`` under :func:`~mmevt.deploy.rewriters.mmdeploy_compat`.

    Args:
        deploy_cfg, model_cfg (Config): from :func:`load_configs`.
        checkpoint (str, optional): full-model checkpoint; None: random weights drawn with
            ``seed`` (enough to check the export, not to predict).
        img (str): the image traced through the model.
        work_dir (str): where ``onnx_config.save_file`` (``end2end.onnx``) is written.
        overwrite (bool): replace an existing file. Defaults to False (refuse).
        seed (int): torch seed before the model is built. Defaults to 0.

    Returns:
        str: the ``.onnx`` file, written atomically (a failed export leaves nothing).
    """
    from mmdeploy.apis import torch2onnx
    from mmdeploy.utils import get_ir_config
    save_file = get_ir_config(deploy_cfg)['save_file']
    out = osp.join(work_dir, save_file)
    if osp.exists(out) and not overwrite:
        raise FileExistsError(f'{out} exists; pass --overwrite to replace it')
    os.makedirs(work_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.deploy-', dir=work_dir)
    try:
        with mmdeploy_compat():
            torch.manual_seed(seed)
            torch2onnx(img, tmp, save_file, deploy_cfg, model_cfg, checkpoint, device='cpu')
        os.replace(osp.join(tmp, save_file), out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
