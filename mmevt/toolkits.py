"""The OpenMMLab toolkits mmevt serves, and the one way to build a model from their configs.

A config names its toolkit by ``default_scope``. Everything here sits below
:mod:`mmevt.registry` (which registers EVT into each toolkit listed in :data:`TOOLKITS`) and
is what every tool and module uses to pick a toolkit, check a config's scope and build its
model: the launchers (:mod:`mmevt.apis.launch`), ONNX export, the FLOP counter, the swap,
the converter, the attention pictures and the benchmark.
"""
import copy
import importlib
import importlib.util
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Mapping, NamedTuple, Optional, Tuple


class Toolkit(NamedTuple):
    """What mmevt knows of one OpenMMLab toolkit."""
    probe_size: int  # side of the square input the swap probes a source backbone with
    flops_shape: Tuple[int, int]  # ``(H, W)`` the FLOP counter defaults to


# The toolkits mmevt registers EVT into, configures and tests. Probe sides are multiples of
# 32 (every stride up to 32 divides them, so output sizes give strides exactly); ImageNet's 224
# for classifiers, whose backbones may not pad (mmpretrain's Swin needs its 7 x 7 windows at
# stride 32), and for pose models (top-down inputs are 256 x 192; mmpose's Swin pads). FLOP
# shapes are the sizes the papers quote: COCO 1280 x 800 (Swin, RMT, EVT), ADE20K UperNet /
# Semantic FPN 2048 x 512 (Swin, RMT), ImageNet 224, COCO keypoints 256 x 192 (mmpose's
# top-down configs, as its get_flops.py defaults to); video recognition (mmaction2's 2D
# recognizers) ImageNet's 224 x 224 a frame, as its TSN / TSM recipes crop; rotated detection
# (mmrotate) DOTA's 1024 x 1024 patches (its recipes split and resize to them).
TOOLKIT_TABLE: Dict[str, Toolkit] = {
    'mmdet': Toolkit(128, (800, 1280)),
    'mmseg': Toolkit(128, (512, 2048)),
    'mmpretrain': Toolkit(224, (224, 224)),
    'mmpose': Toolkit(224, (256, 192)),
    'mmaction': Toolkit(224, (224, 224)),
    'mmrotate': Toolkit(128, (1024, 1024)),
}
TOOLKITS = tuple(TOOLKIT_TABLE)
# Another OpenMMLab 2.x toolkit (its MODELS a child of mmengine's root, so EVT resolves)
# gets these: the swap probes and the FLOP counter defaults at ImageNet's 224 x 224.
OTHER_TOOLKIT = Toolkit(224, (224, 224))


def toolkit_facts(toolkit: str) -> Toolkit:
    """:data:`TOOLKIT_TABLE`'s entry of ``toolkit``, :data:`OTHER_TOOLKIT` for another one."""
    return TOOLKIT_TABLE.get(toolkit, OTHER_TOOLKIT)


def _scope_problem(scope: Any) -> Optional[str]:
    """Why ``scope`` cannot pick a toolkit, or None if it can: an installed package with a
    ``registry.MODELS`` that sees EVT (a child of mmengine's root ``MODELS``)."""
    if not isinstance(scope, str) or not scope.isidentifier():
        return 'not a toolkit name'
    if scope == 'mmengine':
        return 'mmengine is the library the toolkits build on, not a toolkit'
    if importlib.util.find_spec(scope) is None:
        return f'{scope} is not installed'
    try:
        models = getattr(importlib.import_module(f'{scope}.registry'), 'MODELS', None)
    except (ImportError, AssertionError) as err:  # AssertionError: its own mmcv check
        return f'{scope}.registry does not import ({err})'
    if models is None:
        return f'{scope}.registry has no MODELS registry'
    if models.get('EVT') is None:
        return f"{scope}'s MODELS registry does not see EVT (not a child of mmengine's root)"
    return None


def config_toolkit(cfg: Mapping, name: str) -> str:
    """The toolkit owning the loaded config ``cfg`` (its ``default_scope``): one of
    :data:`TOOLKITS`, or another installed OpenMMLab 2.x toolkit whose ``MODELS`` registry
    sees EVT.

    Args:
        cfg (mmengine.Config): the loaded config.
        name (str): what to call the config in the error (its path, usually).

    Raises:
        ValueError: the scope cannot pick a toolkit (not installed, no ``MODELS`` registry,
            or one that does not see EVT); the message says which.
    """
    import mmevt  # noqa: F401  EVT registered, so the registry check below can see it
    scope = cfg.get('default_scope')
    problem = _scope_problem(scope)
    if problem is not None:
        raise ValueError(f'{name}: default_scope must be one of {list(TOOLKITS)} or another '
                         "installed OpenMMLab 2.x toolkit whose MODELS registry sees EVT, to "
                         f'pick a toolkit, got {scope!r}: {problem}')
    return scope


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

    from .patches import patches_needed
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
        ValueError: the scope is not one of :data:`TOOLKITS`.
    """
    import torch
    from mmengine.config import ConfigDict
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
