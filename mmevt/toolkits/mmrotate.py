"""mmrotate (rotated object detection): what mmevt knows and does for it; in the swap, the
smoke test's rotated boxes and the models that need a GPU.

Its configs folder and docs page are ``rotated`` (``configs/rotated``, ``docs/rotated.md``),
its upstream distribution ``mmrotate-dev`` (``requirements/rotate-upstream.txt``).

mmrotate's detectors are mmdet's (``mmdet.FasterRCNN``, ``mmdet.RetinaNet``, ...) with
rotated heads, so EVT takes the backbone's place as in mmdet. Their ground truth is oriented:
the training pipeline ends with ``RotatedBoxes`` (``rbox``: centre, size, angle),
``QuadriBoxes`` (``qbox``: 4 corners) or horizontal boxes (``hbox``), and the smoke batch
gives the same kind, with masks where the pipeline keeps them (:func:`training_targets`).
What decides it is read from the pipeline's transforms, through dataset wrappers: any
transform's ``box_type`` / ``box_type_mapping`` setting (``LoadAnnotations``,
``ConvertBoxType``, ``ConvertMask2BoxType`` of masks loaded as polygons, ...), its defaults
taken from the transform class itself; what cannot be read is an error naming the transform.

Some of mmrotate's models use mmcv ops that exist for CUDA only, in both stacks' mmcv
(:data:`GPU_ONLY_MODULES`): a swapped config of one is written, but its smoke test is refused
on a machine without a GPU, naming the op (:func:`gpu_only_ops`).
"""
import inspect
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .base import Toolkit
from .build import toolkit_scope
from .config_values import training_pipelines
from .mmdet import image_metas

__all__ = ['BOX_TYPES', 'BOX_TYPE_SETTINGS', 'GPU_ONLY_MODULES', 'MASK_KINDS',
           'MMRotate', 'TrainingTargets', 'gpu_only_ops', 'gpu_only_reason', 'pipeline_targets',
           'rotated_batch', 'training_box_type', 'training_targets', 'transform_settings']

# mmrotate's modules (registry types) calling mmcv ops that have a CUDA kernel only (mmcv
# 2.1.0 and onedl-mmcv 2.3.6: tests/test_rotated.py calls each op on the CPU), and the ops.
GPU_ONLY_MODULES: Dict[str, Tuple[str, ...]] = {
    'RotatedIoULoss': ('diff_iou_rotated_2d', ),  # Rotated FCOS / ATSS, RTMDet-R
    'ConvexGIoULoss': ('convex_giou', ),  # RepPoints family
    'BCConvexGIoULoss': ('convex_giou', ),
    'MaxConvexIoUAssigner': ('convex_iou', ),  # Rotated RepPoints, CFA
    'SASAssigner': ('convex_iou', 'points_in_polygons'),  # SASM
    'RotatedRepPointsHead': ('min_area_polygons', ),
    'SAMRepPointsHead': ('min_area_polygons', ),
    'OrientedRepPointsHead': ('min_area_polygons', ),
    'RiRoIAlignRotated': ('riroi_align_rotated', ),  # ReDet
}


def _walk_types(value: Any) -> List[str]:
    """Every ``type`` in a config value, scope prefixes dropped (``'mmdet.X'`` -> ``'X'``)."""
    found: List[str] = []
    if isinstance(value, dict):
        if isinstance(value.get('type'), str):
            found.append(value['type'].split('.')[-1])
        for v in value.values():
            found += _walk_types(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            found += _walk_types(v)
    return found


def gpu_only_ops(model_cfg: Dict[str, Any]) -> Dict[str, Tuple[str, ...]]:
    """The modules of ``model_cfg`` that call mmcv ops without a CPU kernel, and the ops.

    Args:
        model_cfg (dict): an mmrotate config's ``model``.

    Returns:
        dict[str, tuple[str, ...]]: module type -> mmcv ops (empty: it runs on a CPU).
    """
    return {t: GPU_ONLY_MODULES[t] for t in dict.fromkeys(_walk_types(model_cfg))
            if t in GPU_ONLY_MODULES}


def gpu_only_reason(model_cfg: Dict[str, Any]) -> Optional[str]:
    """What of ``model_cfg`` needs a GPU, as the swap's note and the smoke test's error say
    it (``'RotatedIoULoss calls diff_iou_rotated_2d'``); None where it runs on a CPU."""
    needs = gpu_only_ops(model_cfg)
    return '; '.join(f'{m} calls {", ".join(ops)}' for m, ops in needs.items()) or None


# The box types the smoke batch can hold (mmdet's ``HorizontalBoxes``, mmrotate's
# ``RotatedBoxes`` / ``QuadriBoxes``), and the kinds of instance masks (mmdet's
# ``PolygonMasks`` / ``BitmapMasks``, as ``LoadAnnotations``' ``poly2mask`` picks).
BOX_TYPES = ('rbox', 'qbox', 'hbox')
MASK_KINDS = ('polygon', 'bitmap')
# The settings by which a transform decides the ground truth's box type: ``box_type``
# (mmdet's ``LoadAnnotations``, mmrotate's ``ConvertMask2BoxType``) and
# ``box_type_mapping`` (mmrotate's ``ConvertBoxType``, its ``gt_bboxes`` entry). A
# transform with any other setting naming a box type is refused (its meaning is unknown).
BOX_TYPE_SETTINGS = ('box_type', 'box_type_mapping')


@dataclass(frozen=True)
class TrainingTargets:
    """The ground truth an mmrotate config's training pipeline gives the model.

    Attributes:
        box_type (str): its boxes, one of :data:`BOX_TYPES`.
        masks (str, optional): its instance masks, one of :data:`MASK_KINDS`; None where the
            pipeline loads none or drops them (``ConvertMask2BoxType(keep_mask=False)``).
    """
    box_type: str
    masks: Optional[str] = None


def transform_settings(step: Dict[str, Any], registry) -> Tuple[str, Dict[str, Any]]:
    """A pipeline step's transform class name and every setting it runs with: the step's
    arguments over the defaults of the class's ``__init__`` and its bases' (a subclass's
    default first: mmdet's ``LoadAnnotations`` sets ``box_type``, mmcv's base ``with_bbox``).

    Args:
        step (dict): the step's config (``type`` and arguments).
        registry (mmengine.Registry): the ``TRANSFORMS`` registry to find ``type`` in.

    Returns:
        tuple[str, dict]: the class's name and the settings.

    Raises:
        ValueError: ``type`` is not in the registry.
    """
    kind = step.get('type')
    cls = kind if isinstance(kind, type) else registry.get(kind)
    if cls is None:
        raise ValueError(f'the training pipeline\'s transform {kind!r} is not in '
                         f'{registry.scope}\'s TRANSFORMS registry: cannot tell which ground '
                         'truth it gives')
    settings: Dict[str, Any] = {}
    for base in cls.__mro__:
        if '__init__' in vars(base):
            for name, param in inspect.signature(base.__init__).parameters.items():
                if param.default is not param.empty:
                    settings.setdefault(name, param.default)
    settings.update({k: v for k, v in step.items() if k != 'type'})
    return cls.__name__, settings


_UNDECIDED = object()  # a transform that says no box type


def _box_type_given(settings: Dict[str, Any]) -> Any:
    """The box type a transform with ``settings`` gives ``gt_bboxes``: its
    ``box_type_mapping``'s ``gt_bboxes`` entry, else its ``box_type`` where it loads or
    makes boxes (not ``with_bbox=False``); :data:`_UNDECIDED` where it says none."""
    if 'box_type_mapping' in settings:
        return (settings['box_type_mapping'] or {}).get('gt_bboxes', _UNDECIDED)
    if 'box_type' in settings and settings.get('with_bbox', True):
        return settings['box_type']
    return _UNDECIDED


def _after_step(step: Dict[str, Any], registry, box_type: Optional[str],
                masks: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """The box type and mask kind after the pipeline step ``step``, from ``box_type`` /
    ``masks`` before it (None: no boxes / masks yet)."""
    name, settings = transform_settings(step, registry)
    nested = settings.get('transforms')
    if isinstance(nested, (list, tuple)):  # RandomChoice, RandomApply, Compose ...
        state = (box_type, masks)
        for inner in _flat_steps(nested):
            state = _after_step(inner, registry, *state)
        if state != (box_type, masks):
            raise ValueError(f'the training pipeline\'s {name} changes the ground truth '
                             f'inside its transforms (boxes {box_type!r} -> {state[0]!r}, '
                             f'masks {masks!r} -> {state[1]!r}), which may or may not run: '
                             'the smoke batch cannot follow it')
    unknown = [k for k in settings if 'box_type' in k and k not in BOX_TYPE_SETTINGS]
    if unknown:
        raise ValueError(f'the training pipeline\'s {name} decides the box type by '
                         f'{unknown}, which the smoke test cannot read (it reads '
                         f'{list(BOX_TYPE_SETTINGS)})')
    given = _box_type_given(settings)
    if given is not _UNDECIDED:
        if given not in BOX_TYPES:
            raise ValueError(f'the training pipeline\'s {name} gives boxes of type '
                             f'{given!r}; the smoke test makes {list(BOX_TYPES)}')
        box_type = given
    if settings.get('with_mask'):
        if 'poly2mask' not in settings:
            raise ValueError(f'the training pipeline\'s {name} loads masks without saying '
                             f'their kind (no poly2mask): the smoke test makes '
                             f'{list(MASK_KINDS)}')
        masks = 'bitmap' if settings['poly2mask'] else 'polygon'
    if 'keep_mask' in settings and not settings['keep_mask']:
        masks = None  # ConvertMask2BoxType: boxes from the masks, the masks dropped
    return box_type, masks


def _flat_steps(nested: Sequence[Any]) -> List[Dict[str, Any]]:
    """The step configs of a nested ``transforms`` (RandomChoice's: lists of lists)."""
    found: List[Dict[str, Any]] = []
    for item in nested:
        found += _flat_steps(item) if isinstance(item, (list, tuple)) else [item]
    return found


def pipeline_targets(pipeline: Sequence[Dict[str, Any]], registry) -> TrainingTargets:
    """The ground truth a training pipeline ends with, read from every transform that
    decides it (:func:`transform_settings`), in order: boxes from ``LoadAnnotations``'
    ``box_type`` (mmdet's default ``'hbox'``), ``ConvertBoxType``'s ``gt_bboxes``,
    ``ConvertMask2BoxType``'s ``box_type``, or any transform with those settings; masks from
    ``with_mask`` (polygons where ``poly2mask=False``), dropped by ``keep_mask=False``.

    Args:
        pipeline (Sequence[dict]): the steps' configs.
        registry (mmengine.Registry): the ``TRANSFORMS`` registry the steps are found in.

    Returns:
        TrainingTargets: the box type and mask kind.

    Raises:
        ValueError: a transform not in ``registry``, a box type not in :data:`BOX_TYPES`, a
            box-type setting other than :data:`BOX_TYPE_SETTINGS`, masks of no stated kind,
            a change inside a nested ``transforms``, or no transform giving boxes.
    """
    box_type = masks = None
    for step in pipeline:
        box_type, masks = _after_step(step, registry, box_type, masks)
    if box_type is None:
        names = [str(step.get('type')) for step in pipeline]
        raise ValueError(f'the training pipeline {names} gives no boxes: none of its '
                         f'transforms has a setting of {list(BOX_TYPE_SETTINGS)} (e.g. '
                         'LoadAnnotations with_bbox=True)')
    return TrainingTargets(box_type, masks)


def training_targets(cfg) -> TrainingTargets:
    """The ground truth an mmrotate config's training pipeline gives the model
    (:func:`pipeline_targets`), through dataset wrappers
    (:func:`mmevt.toolkits.config_values.training_pipelines`): what the smoke batch holds.

    Args:
        cfg (mmengine.Config): an mmrotate config.

    Returns:
        TrainingTargets: the box type and mask kind.

    Raises:
        ValueError: as :func:`pipeline_targets`; no training pipeline; datasets (of a
            ``ConcatDataset``) whose pipelines end with different ground truth.
    """
    pipelines = training_pipelines(cfg)
    if not pipelines:
        raise ValueError('the config has no training pipeline (train_dataloader.dataset\'s, '
                         'through wrappers, nor train_pipeline): cannot tell its box type')
    with toolkit_scope('mmrotate'):
        from mmrotate.registry import TRANSFORMS
        found = list(dict.fromkeys(pipeline_targets(p, TRANSFORMS) for p in pipelines))
    if len(found) > 1:
        raise ValueError(f'the training datasets\' pipelines end with different ground '
                         f'truth, {found}: the smoke batch holds one')
    return found[0]


def training_box_type(cfg) -> str:
    """The box type an mmrotate config's training pipeline ends with (``'rbox'``,
    ``'qbox'`` or ``'hbox'``): :func:`training_targets`' ``box_type``."""
    return training_targets(cfg).box_type


def rotated_batch(size: int, batch: int, classes: int, box_type: str = 'rbox',
                  masks: Optional[str] = None) -> dict:
    """A generated batch as mmrotate's dataloaders give it: uint8 images with 3 oriented
    objects each (centres inside the image, sides 10-40% of it, angles in [-pi/2, pi/2)),
    with masks of the objects where the training pipeline keeps them.

    Args:
        size (int): the images' side.
        batch (int): the number of images.
        classes (int): labels are drawn from ``range(classes)``.
        box_type (str): one of :data:`BOX_TYPES` (:func:`training_targets`). Defaults to
            ``'rbox'``.
        masks (str, optional): one of :data:`MASK_KINDS`: each object's oriented rectangle
            as a polygon (``PolygonMasks``) or filled in a ``size x size`` bitmap
            (``BitmapMasks``). Defaults to None (no masks).

    Returns:
        dict: ``inputs`` (``batch`` tensors ``(3, size, size)``) and ``data_samples``
        (mmdet's ``DetDataSample`` with ``gt_instances.bboxes`` of ``box_type``, and
        ``gt_instances.masks`` with ``masks``).

    Raises:
        ValueError: ``box_type`` or ``masks`` is not one of those.
    """
    import torch
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import PolygonMasks
    from mmengine.structures import InstanceData
    from mmrotate.structures.bbox import RotatedBoxes
    if box_type not in BOX_TYPES or masks not in MASK_KINDS + (None, ):
        raise ValueError(f'box_type must be one of {list(BOX_TYPES)} and masks one of '
                         f'{list(MASK_KINDS)} or None; got {box_type!r} and {masks!r}')
    gen = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for i in range(batch):
        inputs.append(torch.randint(0, 256, (3, size, size), generator=gen, dtype=torch.uint8))
        centres = size * (0.2 + 0.6 * torch.rand(3, 2, generator=gen))
        sides = size * (0.1 + 0.3 * torch.rand(3, 2, generator=gen))
        angles = math.pi * (torch.rand(3, 1, generator=gen) - 0.5)
        boxes = RotatedBoxes(torch.cat([centres, sides, angles], dim=1))
        sample = DetDataSample(metainfo=dict(
            img_id=i, img_path=f'<generated {i}>.png', img_shape=(size, size),
            ori_shape=(size, size), scale_factor=(1., 1.), flip=False, flip_direction=None))
        sample.gt_instances = InstanceData(
            bboxes=boxes if box_type == 'rbox' else boxes.convert_to(box_type),
            labels=torch.arange(3) % classes)
        if masks:
            corners = boxes.convert_to('qbox').tensor.double().numpy()
            polygons = PolygonMasks([[c] for c in corners], size, size)
            sample.gt_instances.masks = polygons if masks == 'polygon' else \
                polygons.to_bitmap()
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


class MMRotate(Toolkit):
    """mmrotate's detectors: mmdet's with rotated heads. DOTA's 1024 x 1024 patches are the
    FLOP shape (its recipes split and resize to them)."""
    scope = 'mmrotate'
    package = 'mmrotate-dev'
    configs = 'rotated'
    docs = 'rotated'
    requirements = dict(upstream='requirements/rotate-upstream.txt',
                        fork='requirements/fork.txt')
    demo_data = 'generate_dota'
    probe_size = 128
    flops_shape = (1024, 1024)
    keeps_query_recipe = False

    def gpu_only_reason(self, model_cfg: Mapping) -> Optional[str]:
        return gpu_only_reason(model_cfg)

    def recipe_family(self, model_cfg: Mapping) -> Optional[str]:
        return 'rotated'  # mmrotate's Swin-T recipes: one optimizer for every detector

    def smoke_batches(self, cfg, model_cfg: Mapping, size: int, name: str,
                      batch: int = 2, classes: int = 3) -> Tuple[dict, List[dict]]:
        """Oriented boxes (and masks) as the training pipeline gives them
        (:func:`training_targets`; its ValueError names ``name``)."""
        try:
            targets = training_targets(cfg)
        except ValueError as e:
            raise ValueError(f'{name}: {e}') from None
        data = rotated_batch(size, batch, classes, targets.box_type, targets.masks)
        return data, [data]

    def flops_data_samples(self, hw: Tuple[int, int]) -> Optional[list]:
        return image_metas(hw)


TOOLKIT = MMRotate()
