"""The one way to build a model from a toolkit's config, in the toolkit's scope.

What every tool and module uses to load a config and build its model: the launchers
(:mod:`mmevt.apis.launch`), ONNX export, the FLOP counter, the swap, the converter, the
attention pictures and the benchmark.
"""
import copy
import importlib
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Optional


def toolkit_models(toolkit: str):
    """The toolkit's ``MODELS`` registry (``<toolkit>.registry.MODELS``)."""
    return importlib.import_module(f'{toolkit}.registry').MODELS


@contextmanager
def toolkit_scope(toolkit: str) -> Iterator[Any]:
    """Make ``toolkit`` the default scope for the block (leaving no global scope behind)
    and yield its ``MODELS`` registry."""
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope(toolkit):
        yield toolkit_models(toolkit)


def load_config(path: str, cfg_options: Optional[Mapping] = None):
    """``Config.fromfile(path)`` after ``import mmevt`` (so ``mmevt::`` bases and EVT
    resolve), with ``cfg_options`` (a dict as ``--cfg-options`` parses it) merged in."""
    import mmevt  # noqa: F401
    from mmengine.config import Config

    from ..patches import patches_needed
    with patches_needed('package-lookup', 'config-prefix'):
        cfg = Config.fromfile(path)
    if cfg_options:
        cfg.merge_from_dict(dict(cfg_options))
    return cfg


def build_model(cfg, toolkit: Optional[str] = None, *, part: Optional[str] = None,
                name: str = 'config', seed: Optional[int] = None,
                with_data_preprocessor: bool = False, drop_init_cfg: bool = False,
                checkpoint: Optional[str] = None, revert_sync_bn: bool = False,
                eval_mode: bool = False, device: Optional[str] = None):
    """Build the model of an OpenMMLab config with its toolkit's ``MODELS`` registry.

    Each caller states what it needs; nothing is done that is not asked for (weights are
    initialised as the model's constructor leaves them; ``init_cfg`` checkpoints are not
    read, since ``init_weights`` is not called).

    Args:
        cfg (mmengine.Config | dict): a whole config (its ``model`` is built and its
            ``default_scope`` picks the toolkit) or, with ``toolkit``, a model config dict
            (a backbone's, say), which is deep-copied, never changed.
        toolkit (str, optional): the toolkit of a model config dict. Defaults to None (the
            config's ``default_scope``).
        part (str, optional): build only this part of the model config (e.g.
            ``'backbone'``). Defaults to None (the whole model).
        name (str): what to call the config in errors. Defaults to ``'config'``.
        seed (int, optional): build under ``torch.manual_seed(seed)`` with the global RNG
            restored afterwards (the same random weights on every run). Defaults to None.
        with_data_preprocessor (bool): give the model the config's top-level
            ``data_preprocessor`` when the model config has none (as the runners do).
            Defaults to False.
        drop_init_cfg (bool): build (the part) with ``init_cfg=None``, e.g. where a
            pretrained checkpoint may be absent. Defaults to False.
        checkpoint (str, optional): load these weights strictly (safe loading).
            Defaults to None.
        revert_sync_bn (bool): turn ``SyncBatchNorm`` into ``BatchNorm`` (a process without
            a process group). Defaults to False.
        eval_mode (bool): return the model in eval mode. Defaults to False.
        device (str, optional): move the model there. Defaults to None (where built).

    Returns:
        nn.Module: the model (or the part).

    Raises:
        ValueError: the scope cannot pick a toolkit (:func:`mmevt.toolkits.config_toolkit`).
    """
    import torch
    from mmengine.config import ConfigDict

    from . import config_toolkit
    if toolkit is None:
        toolkit = config_toolkit(cfg, name)
        model_cfg = copy.deepcopy(cfg.model)
        if with_data_preprocessor and 'data_preprocessor' not in model_cfg \
                and 'data_preprocessor' in cfg:
            model_cfg['data_preprocessor'] = cfg.data_preprocessor
    else:
        config_toolkit(dict(default_scope=toolkit), name)
        model_cfg = copy.deepcopy(cfg)
    if part is not None:
        model_cfg = model_cfg[part]
    model_cfg = ConfigDict(model_cfg)  # the toolkits read nested settings as attributes
    if drop_init_cfg:
        model_cfg['init_cfg'] = None
    with toolkit_scope(toolkit) as models, torch.random.fork_rng(enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(seed)
        model = models.build(model_cfg)
    if checkpoint:
        from mmengine.runner import load_checkpoint
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    if revert_sync_bn:
        from mmengine.model import revert_sync_batchnorm
        model = revert_sync_batchnorm(model)
    if device is not None:
        model = model.to(device)
    return model.eval() if eval_mode else model
