"""The smoke test of a swapped config: one training step and one prediction on a generated
batch, and the EVT backbone's parameters / FLOPs (``mmevt-swap --check``).

It builds DST as a runner does and trains it, unlike the ``check_*`` validators elsewhere
in mmevt, so it is :func:`smoke_test_config`; ``check_config`` is its deprecated name.
"""
import contextlib
import copy
import logging
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple, Union

from ..analysis import count_flops, count_params
from ..toolkits import build_model, config_toolkit, get_toolkit, load_config, toolkit_scope
from ..toolkits.config_values import to_plain
from .probe import EVT_STRIDES


def _query_tokens_size(model_cfg: dict, stages: Sequence[int]) -> int:
    """Smallest square side (multiple of 32) giving a two-stage query detector (DINO,
    two-stage Deformable DETR) at least as many encoder tokens as it selects queries."""
    two_stage = model_cfg.get('as_two_stage') or model_cfg.get('type') in ('DINO', 'DDQDETR')
    queries = model_cfg.get('num_queries')
    if not two_stage or not queries:
        return 0
    strides = [EVT_STRIDES[s] for s in stages]
    extra = (model_cfg.get('neck') or {}).get('num_outs', len(strides)) - len(strides)
    strides += [strides[-1] * 2 ** (k + 1) for k in range(max(extra, 0))]
    side = 32
    while sum(math.ceil(side / s) ** 2 for s in strides) < queries:
        side += 32
    return side


def smoke_test_size(model_cfg: dict, stages: Sequence[int],
                    toolkit: Optional[str] = None) -> int:
    """A square input side the swapped model accepts: 64 (EVT's four stride-2 levels need
    32; 64 leaves the stride-32 map 2 x 2), more for two-stage query detectors; a
    toolkit's own :attr:`~mmevt.toolkits.base.Toolkit.smoke_size` where it has one
    (mmaction2's: the frame its recipes crop, so that the clips are shaped as the
    recognizer's training data).

    Args:
        model_cfg (dict): DST's ``model``.
        stages (Sequence[int]): the EVT stages the model reads.
        toolkit (str, optional): DST's toolkit. Defaults to None (none of its own size).

    Returns:
        int: the side, a multiple of 32.
    """
    if toolkit is not None and get_toolkit(toolkit).smoke_size:
        return get_toolkit(toolkit).smoke_size
    return max(64, _query_tokens_size(model_cfg, stages))


def _num_classes(model_cfg: dict) -> int:
    """The fewest classes any head of ``model_cfg`` names (3 when none does)."""
    found = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ('num_classes', 'num_things_classes') and isinstance(x, int) and x > 0:
                    found.append(x)
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
    walk(model_cfg)
    return min(found) if found else 3


def runner_model_cfg(cfg, toolkit: str, size: Optional[int] = None) -> dict:
    """``cfg.model`` as the runner builds it, with the data preprocessor's batch
    augmentations (e.g. LSJ's fixed 1024 pad) off and the backbone's ``init_cfg`` dropped
    (no checkpoint needed).

    Args:
        cfg (mmengine.Config): the config.
        toolkit (str): its toolkit.
        size (int, optional): the pad size of a toolkit whose data preprocessor pads to a
            fixed size (:attr:`~mmevt.toolkits.base.Toolkit.pads_to_input_size`: mmseg's),
            for a ``size x size`` input. Defaults to None (the config's).

    Returns:
        dict: the model config, plain containers.
    """
    model = to_plain(cfg.model)
    if cfg.get('data_preprocessor') and 'data_preprocessor' not in model:
        model['data_preprocessor'] = to_plain(cfg.data_preprocessor)
    dp = model.get('data_preprocessor')
    if isinstance(dp, dict):
        dp.pop('batch_augments', None)
        if get_toolkit(toolkit).pads_to_input_size and dp.get('size') and size:
            dp['size'] = (size, size)
    if isinstance(model.get('backbone'), dict):
        model['backbone'].pop('init_cfg', None)  # no checkpoint needed for the check
    return model


@contextlib.contextmanager
def quiet_logger(level: int = logging.WARNING) -> Iterator[None]:
    """mmengine's current logger at ``level`` for the block (the optimizer constructor
    logs every parameter's options at INFO)."""
    from mmengine.logging import MMLogger
    logger = MMLogger.get_current_instance()
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def flops_or_none(module, size: Union[int, Tuple[int, int]], frames: int = 1
                  ) -> Optional[int]:
    """FLOPs (multiply-adds, mmengine's counter: :func:`mmevt.analysis.count_flops`) of
    ``module`` on a ``(frames, 3, size, size)`` input (``(frames, 3, H, W)`` for a pair
    ``(H, W)``; ``frames``: a 2D recognizer's backbone runs on every frame of a clip); None
    where the counter fails on it (a count must not hide the smoke test's result)."""
    height, width = (size, size) if isinstance(size, int) else size
    try:
        with quiet_logger(logging.ERROR):  # it warns of each module the trace did not call
            return count_flops(module, (frames, 3, height, width))
    except Exception:
        return None


@dataclass
class SmokeTestResult:
    """What :func:`smoke_test_config` measured: the input side, the training loss, the
    backbone's gradient norm, the number of predictions, the seconds taken, (with
    ``flops``) the whole model's parameters and the backbone's FLOPs, and the training
    batch's ``(H, W)`` (``(size, size)`` but for mmpose, whose pipelines set it; the
    FLOPs are counted at it), and for mmaction2 the frames a clip (``segments``: the
    backbone's FLOPs are a clip's)."""
    size: int
    loss: float
    backbone_grad_norm: float
    num_predictions: int
    seconds: float
    params: Optional[int] = None
    backbone_flops: Optional[int] = None
    input_hw: Optional[Tuple[int, int]] = None
    segments: Optional[int] = None


def smoke_test_config(dst: str, size: Optional[int] = None,
                      stages: Sequence[int] = (0, 1, 2, 3), flops: bool = True,
                      log: Callable[[str], None] = print) -> SmokeTestResult:
    """Build ``dst`` as a runner does, run one training step (finite loss, non-zero
    gradients in the backbone, optimizer step) and one prediction on a generated batch
    (the toolkit's :meth:`~mmevt.toolkits.base.Toolkit.smoke_batches`: for mmpose made by
    the config's own pipelines, for mmaction2 clips ``(2, segments, 3, 224, 224)`` of the
    training pipeline's segments, for mmrotate oriented boxes as its pipeline gives them).

    Args:
        dst (str): the swapped config.
        size (int, optional): input side (for mmpose the generated images' side, which its
            pipelines crop / resize to its input size). Defaults to :func:`smoke_test_size`.
        stages (Sequence[int]): EVT stages the model reads (for :func:`smoke_test_size`).
            Defaults to ``(0, 1, 2, 3)``.
        flops (bool): also count the whole model's params and the EVT backbone's FLOPs.
            Defaults to True.
        log (callable): where the summary line goes. Defaults to ``print``.

    Returns:
        SmokeTestResult: what was measured.

    Raises:
        ValueError: a non-finite loss, no backbone gradient, or a wrong number of
            predictions; a model calling an mmcv op that has no CPU kernel (the toolkit's
            :meth:`~mmevt.toolkits.base.Toolkit.gpu_only_reason`: the test runs on the
            CPU), or whose training pipeline's ground truth cannot be read (mmrotate's
            :func:`~mmevt.toolkits.mmrotate.training_targets`).
    """
    import torch
    from mmengine.optim import build_optim_wrapper
    start = time.perf_counter()
    cfg = load_config(dst)
    toolkit = config_toolkit(cfg, dst)
    kit = get_toolkit(toolkit)
    uses = kit.gpu_only_reason(cfg.model)
    if uses:
        raise ValueError(f'{dst}: the smoke test runs on the CPU, and this model needs a '
                         f'GPU: {uses}, which mmcv implements for CUDA only (no CPU '
                         'kernel). The swapped config is written: train it on a GPU')
    size = size or smoke_test_size(cfg.model, stages, toolkit)
    segments = kit.clip_frames(cfg)
    model_cfg = runner_model_cfg(cfg, toolkit, size)
    torch.manual_seed(0)  # not build_model's seed=: the training step draws from it too
    model = build_model(model_cfg, toolkit)
    with quiet_logger():
        model.init_weights()  # as the runner does (e.g. Sparse R-CNN's small box deltas)
    optim_cfg = to_plain(cfg.optim_wrapper)
    if optim_cfg.get('type') == 'AmpOptimWrapper' and not torch.cuda.is_available():
        optim_cfg['type'] = 'OptimWrapper'  # mmengine's AMP wrapper needs a GPU
        optim_cfg.pop('loss_scale', None)
    batch, predict_batches = kit.smoke_batches(cfg, model_cfg, size, dst,
                                               classes=min(3, _num_classes(model_cfg)))
    with toolkit_scope(toolkit), quiet_logger():
        optim = build_optim_wrapper(model, optim_cfg)
        model.train()
        # A head initialised to zero (mmpretrain's ViT head, by its init_cfg) passes no
        # gradient to the backbone in the first step: then a second step must.
        for step in range(2):
            data = model.data_preprocessor(copy.deepcopy(batch), True)
            loss, _ = model.parse_losses(model(**data, mode='loss'))
            if not torch.isfinite(loss):
                raise ValueError(f'{dst}: the training loss is {loss.item()} on a generated '
                                 'batch')
            optim.backward(loss)
            grads = [p.grad.norm() for p in model.backbone.parameters() if p.grad is not None]
            grad_norm = float(torch.stack(grads).norm()) if grads else 0.
            optim.step()
            optim.zero_grad()
            if grad_norm > 0:
                break
        if not grad_norm > 0 or not math.isfinite(grad_norm):
            raise ValueError(f'{dst}: the backbone gets no (finite) gradient in {step + 1} '
                             f'training steps: norm {grad_norm}')
        model.eval()
        with torch.no_grad():
            preds = []
            for images in predict_batches:
                data = model.data_preprocessor(copy.deepcopy(images), False)
                preds += model(**data, mode='predict')
    num_images = sum(len(images['inputs']) for images in predict_batches)
    if len(preds) != num_images:
        raise ValueError(f'{dst}: {len(preds)} predictions for {num_images} images')
    height, width = (int(n) for n in batch['inputs'][0].shape[-2:])  # mmpose: its pipeline's
    result = SmokeTestResult(size, float(loss.detach()), grad_norm, len(preds),
                             time.perf_counter() - start, input_hw=(height, width),
                             segments=segments)
    if flops:
        result.params = count_params(model)
        result.backbone_flops = flops_or_none(model.backbone.eval(), result.input_hw,
                                              segments or 1)
    clips = f' clips of {segments} segments' if segments else ''
    log(f'check: {height} x {width} batch of {len(preds)}{clips}: loss {result.loss:.4g}, '
        f'backbone gradient norm {grad_norm:.3g}, {len(preds)} predictions '
        f'({result.seconds:.1f} s)')
    return result


# Deprecated names (kept one release): "check" suggested validation only.
CheckResult = SmokeTestResult
check_size = smoke_test_size


def check_config(dst: str, size: Optional[int] = None, stages: Sequence[int] = (0, 1, 2, 3),
                 flops: bool = True, log: Callable[[str], None] = print) -> SmokeTestResult:
    """Deprecated name of :func:`smoke_test_config` (kept one release)."""
    warnings.warn('mmevt.swap.check_config is deprecated and will be removed in the next '
                  'release; use smoke_test_config (it trains a step and predicts)',
                  FutureWarning, stacklevel=2)
    return smoke_test_config(dst, size, stages, flops, log)
