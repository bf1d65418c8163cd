"""mmrotate's detectors in the swap: the smoke test's rotated boxes, and the models that need
a GPU.

mmrotate's detectors are mmdet's (``mmdet.FasterRCNN``, ``mmdet.RetinaNet``, ...) with
rotated heads, so EVT takes the backbone's place as in mmdet. Their ground truth is oriented:
the training pipeline ends with ``RotatedBoxes`` (``rbox``: centre, size, angle),
``QuadriBoxes`` (``qbox``: 4 corners) or horizontal boxes (``hbox``, weakly supervised
H2RBox), and the smoke batch gives the same kind (:func:`training_box_type`).

Some of mmrotate's models use mmcv ops that exist for CUDA only, in both stacks' mmcv
(:data:`GPU_ONLY_MODULES`): a swapped config of one is written, but its smoke test is refused
on a machine without a GPU, naming the op (:func:`gpu_only_ops`).
"""
import math
from typing import Any, Dict, List, Optional, Tuple

from ..analysis.flops import training_pipeline

__all__ = ['GPU_ONLY_MODULES', 'gpu_only_ops', 'gpu_only_reason', 'rotated_batch',
           'training_box_type']

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


def training_box_type(cfg) -> str:
    """The box type the config's training pipeline ends with: ``LoadAnnotations``'
    ``box_type`` (mmdet's default ``'hbox'``), then the last ``ConvertBoxType`` of
    ``gt_bboxes``.

    Args:
        cfg (mmengine.Config): an mmrotate config.

    Returns:
        str: ``'rbox'``, ``'qbox'`` or ``'hbox'``.
    """
    box = 'hbox'
    for step in training_pipeline(cfg):
        kind = str(step.get('type', '')).split('.')[-1]
        if kind == 'LoadAnnotations':
            box = step.get('box_type', 'hbox')
        elif kind == 'ConvertBoxType':
            box = step.get('box_type_mapping', {}).get('gt_bboxes', box)
    return box


def rotated_batch(size: int, batch: int, classes: int, box_type: str = 'rbox') -> dict:
    """A generated batch as mmrotate's DOTA dataloader gives it: uint8 images with 3 oriented
    objects each (centres inside the image, sides 10-40% of it, angles in [-pi/2, pi/2)).

    Args:
        size (int): the images' side.
        batch (int): the number of images.
        classes (int): labels are drawn from ``range(classes)``.
        box_type (str): ``'rbox'``, ``'qbox'`` or ``'hbox'`` (:func:`training_box_type`).
            Defaults to ``'rbox'``.

    Returns:
        dict: ``inputs`` (``batch`` tensors ``(3, size, size)``) and ``data_samples``
        (mmdet's ``DetDataSample`` with ``gt_instances.bboxes`` of ``box_type``).
    """
    import torch
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData
    from mmrotate.structures.bbox import RotatedBoxes
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
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)
