"""The interface between mmevt's shared code and one OpenMMLab toolkit: :class:`Toolkit`.

The swap, the FLOP counter, ONNX export and mmdeploy ask the toolkit (as mmdeploy's shared
code asks a codebase); none of them tests a toolkit's name. Each toolkit mmevt serves is a
subclass in its own module (``mmevt/toolkits/<scope>.py``), listed in
:data:`mmevt.toolkits.TOOLKIT_TABLE`; :class:`Toolkit` itself is what mmevt does for another
OpenMMLab 2.x toolkit (its ``MODELS`` a child of mmengine's root, so EVT resolves).
"""
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple


class Toolkit:
    """What mmevt knows and does for one OpenMMLab toolkit.

    The attributes are facts; the methods are what the shared code calls. A subclass sets
    the facts that differ from another toolkit's and overrides the methods it needs.

    Attributes:
        scope (str): its ``default_scope``, import name and module name here.
        package (str): its upstream distribution (``pip install`` name).
        configs (str): its folder under ``configs/``.
        docs (str): its docs page (``docs/<docs>.md``). Empty: none of its own.
        requirements (dict): stack name -> the requirements file installing it there
            (absent: not on that stack).
        demo_data (str): the :mod:`mmevt.datasets` function generating its demo data.
        probe_size (int): side of the square input the swap probes a source backbone with.
        flops_shape (tuple[int, int]): ``(H, W)`` the FLOP counter defaults to (a frame's
            for video).
        smoke_size (int): the smoke test's input side. Defaults to 0 (the swap's smallest
            side the model accepts).
        keeps_query_recipe (bool): query-based models (DETR family, MaskFormer ...) keep
            their own recipe under ``--recipe evt`` (:func:`mmevt.swap.recipes.query_based`).
        backbone_family (str): our family whose backbone settings (drop path, norm) a model
            keeping its own recipe gets.
        schedule_why (str): why ``--recipe evt`` takes our family's ``param_scheduler``
            too (empty: SRC's schedule is kept).
        schedule_ends_at_max_iters (bool): our iteration schedule ends at SRC's
            ``max_iters``.
        rgb_setting (tuple[str, bool]): the data preprocessor's colour-order key and the
            value giving EVT's ImageNet weights RGB.
        pads_to_input_size (bool): its data preprocessor pads to a fixed ``size``, which
            the smoke test sets to its input.
        deploy_task (str): its mmdeploy task (``codebase_config.task``), which decides the
            outputs the ONNX-vs-PyTorch check compares.
        metrics (tuple[str, ...]): :mod:`mmevt.evaluation` metrics registered into its
            ``METRICS``.
        onnx_kind (str): what ONNX export calls a whole model (``'classifier'``,
            ``'segmentor'``); empty: only its backbone exports, :attr:`onnx_refusal` says why.
        tables_count_features_only (bool): the model table counts backbone + neck only
            (the heads' cost depends on the proposals a random model keeps).
        zoo_counts_whole_model (bool): the zoo's FLOPs and Parameters count the whole model
            (a classifier), at the config's ``-NNNpx`` input; otherwise its backbone alone, at
            :attr:`flops_shape` (``tools/misc/make_metafile.py``).
    """
    scope: str = ''
    package: str = ''
    configs: str = ''
    docs: str = ''
    requirements: Dict[str, str] = {}
    demo_data: str = ''
    probe_size: int = 224
    flops_shape: Tuple[int, int] = (224, 224)
    smoke_size: int = 0
    keeps_query_recipe: bool = True
    backbone_family: str = 'upernet'
    schedule_why: str = ''
    schedule_ends_at_max_iters: bool = False
    rgb_setting: Tuple[str, bool] = ('bgr_to_rgb', True)
    pads_to_input_size: bool = False
    metrics: Tuple[str, ...] = ()
    deploy_task: str = 'Classification'
    onnx_kind: str = 'classifier'
    onnx_refusal: str = ''
    tables_count_features_only: bool = False
    zoo_counts_whole_model: bool = False

    def __init__(self, scope: Optional[str] = None) -> None:
        if scope is not None:
            self.scope = scope

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.scope!r})'

    # ------------------------------------------------------------------ the swap's plan
    def refuse_unswappable(self, model_cfg: Mapping, src: str) -> None:
        """Raise ValueError (naming ``src`` and why) for a model EVT cannot replace the
        backbone of; checked before SRC is built. Another toolkit refuses nothing."""

    def swap_backbone_type(self) -> Dict[str, Tuple[Any, Optional[str]]]:
        """The written backbone's ``type`` (and ``_scope_``) keys: ``key -> (value, why)``."""
        return dict(_scope_=(self.scope, None), type=('EVT', None))

    def gpu_only_reason(self, model_cfg: Mapping) -> Optional[str]:
        """Why a model of this config needs a GPU (mmcv ops without a CPU kernel), else
        None."""
        return None

    def recipe_family(self, model_cfg: Mapping) -> Optional[str]:
        """Which of our families' recipes fits ``model_cfg`` (query-based models are
        decided before, by :attr:`keeps_query_recipe`); None: it keeps its own.

        Another toolkit's heads read the backbone's maps, as our segmentors': an FPN neck
        -> ``sem_fpn``, else ``upernet``.
        """
        neck = model_cfg.get('neck')
        return 'sem_fpn' if neck and neck.get('type') == 'FPN' else 'upernet'

    def kept_recipe_note(self, model_type: str) -> str:
        """Why a model for which :meth:`recipe_family` is None keeps its own recipe."""
        return (f'{model_type} is query-based: none of our families matches, so its own '
                'AdamW recipe (lr tuned for its decoder, backbone lr x0.1) is kept')

    # ---------------------------------------------------------------- the smoke batch
    def clip_frames(self, cfg) -> Optional[int]:
        """Frames a clip of the model's inputs ``(N, frames, 3, H, W)``; None for images."""
        return None

    def make_batch(self, cfg, model_cfg: Mapping, size: int, batch: int,
                   classes: int) -> dict:
        """A generated batch as the toolkit's dataloader gives it: ``inputs`` (``batch``
        uint8 tensors ``(3, size, size)``, :func:`random_images`) and ``data_samples``
        with random annotations of fewer than ``classes`` classes.

        Another toolkit gets a label an image in mmpretrain's ``DataSample``, as a
        classifier's batch.
        """
        from mmpretrain.structures import DataSample
        samples = [DataSample(metainfo=dict(img_shape=(size, size))).set_gt_label(i % classes)
                   for i in range(batch)]
        return dict(inputs=random_images(size, batch), data_samples=samples)

    def smoke_batches(self, cfg, model_cfg: Mapping, size: int, name: str,
                      batch: int = 2, classes: int = 3) -> Tuple[dict, List[dict]]:
        """The smoke test's training batch and its prediction batches.

        Args:
            cfg (mmengine.Config): the config.
            model_cfg (dict): its model as the runner builds it.
            size (int): the images' side.
            name (str): the config's name, for errors.
            batch (int): images (clips) a batch. Defaults to 2.
            classes (int): labels are drawn below this. Defaults to 3.

        Returns:
            tuple: the training batch and a list of prediction batches.
        """
        data = self.make_batch(cfg, model_cfg, size, batch, classes)
        return data, [data]

    # -------------------------------------------------------------- the FLOP counter
    def flops_data_samples(self, hw: Tuple[int, int]) -> Optional[list]:
        """Data samples the ``mode='tensor'`` forward needs on a ``(1, 3, *hw)`` input (a
        detector's RPN reads image metas); None: none."""
        return None

    def flops_forward(self, model, hw: Tuple[int, int],
                      features_only: bool) -> Callable[[Any], Any]:
        """What the FLOP counter traces on one input: ``extract_feat`` with
        ``features_only``, else the ``mode='tensor'`` forward."""
        if features_only:
            return model.extract_feat
        samples, call = self.flops_data_samples(hw), model.forward
        return lambda inputs: call(inputs, samples, mode='tensor')

    # ------------------------------------------------------------------- deployment
    def check_deploy_outputs(self, model_cfg, output_names: Sequence[str]) -> None:
        """Raise ValueError where the deploy config's ``output_names`` do not fit the
        model (mmdeploy). Another toolkit checks nothing."""


def random_images(size: int, batch: int, gen=None) -> list:
    """``batch`` uint8 images ``(3, size, size)`` drawn from ``gen`` (a ``torch.Generator``;
    defaults to a new one of seed 0: the same every run)."""
    import torch
    gen = gen if gen is not None else torch.Generator().manual_seed(0)
    return [torch.randint(0, 256, (3, size, size), generator=gen, dtype=torch.uint8)
            for _ in range(batch)]
