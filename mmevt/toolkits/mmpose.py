"""mmpose (pose estimation): what mmevt knows and does for it; the smoke test's batches,
made by the config's own pipelines.

A pose model's targets come from its codec (heatmaps, SimCC vectors, bottom-up maps) and
some heads flatten a map of the config's input size (``in_featuremap_size``), so the batch
is not drawn at random as for the other toolkits: a few images of
:func:`mmevt.datasets.generate_keypoints` go through the config's own training pipeline
(the training batch) and test pipeline (the prediction batch), without their random
augmentations (:data:`KEPT_STEPS`: geometry, targets and packing only; augmentations may
need optional packages, e.g. RTMPose's ``Albumentation``). The keypoints are the
config's own dataset's (:func:`config_metainfo`: their number, flip indices and sigmas,
e.g. WFLW's 98 face points), which the codec's targets and the head's outputs are made for.
"""
import contextlib
import io
import json
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .base import Toolkit
from .build import toolkit_scope
from .config_values import to_plain

# mmpose: our pose family is top-down (a crop per person); bottom-up models (one map for all
# people: DEKR, CID, associative embedding) keep their own recipe.
TOPDOWN_POSE_MODELS = ('TopdownPoseEstimator', )

# The steps of a pose pipeline the smoke test keeps: loading, the crop / resize to the
# model's input, the codec's targets and packing.
KEPT_STEPS = ('LoadImage', 'GetBBoxCenterScale', 'TopdownAffine', 'BottomupRandomAffine',
              'BottomupResize', 'GenerateTarget', 'BottomupGetHeatmapMask', 'PackPoseInputs')


def kept_steps(pipeline: List[dict]) -> List[dict]:
    """The steps of ``pipeline`` named in :data:`KEPT_STEPS` (scope prefixes ignored)."""
    return [dict(step) for step in pipeline
            if str(step.get('type', '')).split('.')[-1] in KEPT_STEPS]


def _pipeline(cfg, loader: str, fallback: str) -> List[dict]:
    """The pipeline of ``cfg[loader]``'s dataset, else the top-level ``fallback`` one."""
    dataset = to_plain(cfg.get(loader, {})).get('dataset', {})
    pipeline = dataset.get('pipeline') or to_plain(cfg.get(fallback, []))
    if not pipeline:
        raise ValueError(f'{loader} has no pipeline (nor has {fallback}): cannot make a '
                         'batch for the smoke test')
    return kept_steps(pipeline)


def _dataset_cfg(dataset: Dict[str, Any]) -> Dict[str, Any]:
    """The dataset whose keypoints a (possibly wrapped) training dataset config has:
    ``RepeatDataset`` / ``ClassBalancedDataset`` hold one in ``dataset``, mmpose's
    ``CombinedDataset`` several in ``datasets`` beside the ``metainfo`` they are converted
    to."""
    while 'metainfo' not in dataset and ('dataset' in dataset or 'datasets' in dataset):
        dataset = dataset.get('dataset') or dataset['datasets'][0]
    return dataset


def config_metainfo(cfg) -> Optional[Dict[str, Any]]:
    """The keypoint metainfo of ``cfg``'s training dataset, as a dataset takes it.

    The dataset config's own ``metainfo`` (a custom dataset's, or ``dict(from_file=...)``),
    else its class's ``METAINFO`` (``WFLWDataset``: 98 face keypoints); None when the config
    names no dataset (then COCO's 17 body keypoints).

    Returns:
        dict or None: what a dataset's ``metainfo`` argument takes (mmpose's
        ``parse_pose_metainfo`` of it has ``num_keypoints``, ``flip_indices``, ...).
    """
    from mmpose.registry import DATASETS
    dataset = _dataset_cfg(to_plain(cfg.get('train_dataloader', {})).get('dataset', {}))
    metainfo = dataset.get('metainfo')
    if metainfo is None and dataset.get('type'):
        metainfo = getattr(DATASETS.get(str(dataset['type']).split('.')[-1]), 'METAINFO', None)
    return dict(metainfo) if metainfo else None


def _with_keypoints(ann_file: str, num_keypoints: int) -> None:
    """Rewrite the generated COCO annotations in place with ``num_keypoints`` points per
    figure: the figure's 17 joints in turn, each repeat a little further along the limb to
    the next (distinct points inside the figure's box, for a smoke test of any dataset)."""
    with open(ann_file) as f:
        data = json.load(f)
    for ann in data['annotations']:
        joints = [ann['keypoints'][i:i + 3] for i in range(0, len(ann['keypoints']), 3)]
        points: List[float] = []
        for k in range(num_keypoints):
            (x0, y0, _), (x1, y1, _) = joints[k % 17], joints[(k + 1) % 17]
            t = (k // 17) / (num_keypoints // 17 + 1)
            points += [round(x0 + t * (x1 - x0), 2), round(y0 + t * (y1 - y0), 2), 2]
        ann.update(keypoints=points, num_keypoints=num_keypoints)
    with open(ann_file, 'w') as f:
        json.dump(data, f)


def pose_batches(cfg, size: int, batch: int = 2) -> Tuple[dict, List[dict]]:
    """A training batch of ``batch`` generated images, and prediction batches of as many
    (one batch for a top-down model; one per image for a bottom-up one, whose heads
    predict an image at a time, as mmpose's bottom-up configs test with batch 1).

    Args:
        cfg (mmengine.Config): the mmpose config (its ``model.type`` tells top-down from
            bottom-up, its pipelines make the inputs and targets).
        size (int): the side of the generated images (the pipelines then crop / resize
            them to the model's input size).
        batch (int): images per batch. Defaults to 2.

    Returns:
        tuple: the training batch and a list of prediction batches, dicts with ``inputs``
        (uint8 tensors) and ``data_samples``, as the toolkit's dataloader gives them.
    """
    from mmengine.dataset import pseudo_collate

    from ..datasets import generate_keypoints
    mode = 'bottomup' if 'Bottomup' in str(cfg.model.get('type')) else 'topdown'
    steps = {'training': _pipeline(cfg, 'train_dataloader', 'train_pipeline'),
             'validation': _pipeline(cfg, 'val_dataloader', 'val_pipeline')}
    out: List[Any] = []
    # the COCO api prints its index building to stdout: not the smoke test's output
    with tempfile.TemporaryDirectory(prefix='mmevt-pose-batch-') as root, \
            toolkit_scope('mmpose'), contextlib.redirect_stdout(io.StringIO()):
        from mmpose.datasets.datasets.utils import parse_pose_metainfo
        from mmpose.registry import DATASETS
        metainfo = config_metainfo(cfg)
        count = parse_pose_metainfo(dict(metainfo))['num_keypoints'] if metainfo else 17
        paths = generate_keypoints(root, batch, batch, (size, size), seed=0)
        for split, pipeline in steps.items():
            if count != 17:
                _with_keypoints(paths[f'keypoints_{split}'], count)
            dataset = DATASETS.build(dict(
                type='CocoDataset', data_root=root, data_mode=mode, metainfo=metainfo,
                ann_file=paths[f'keypoints_{split}'], data_prefix=dict(img=f'images/{split}/'),
                test_mode=split == 'validation', pipeline=pipeline))
            out.append([dataset[i] for i in range(batch)])
    train, test = out
    if mode == 'bottomup':
        return pseudo_collate(train), [pseudo_collate([item]) for item in test]
    return pseudo_collate(train), [pseudo_collate(test)]


class MMPose(Toolkit):
    """mmpose's top-down heatmap models. Probed at 224 (its Swin pads); the FLOP shape is
    COCO keypoints' 256 x 192 (its top-down configs', as its get_flops.py defaults to)."""
    scope = 'mmpose'
    package = 'mmpose'
    configs = 'pose'
    docs = 'pose'
    requirements = dict(upstream='requirements/pose-upstream.txt')  # no fork of it
    demo_data = 'generate_keypoints'
    probe_size = 224
    flops_shape = (256, 192)
    keeps_query_recipe = False
    backbone_family = 'pose'

    def recipe_family(self, model_cfg: Mapping) -> Optional[str]:
        """``pose`` for a top-down model, None for bottom-up ones."""
        return 'pose' if model_cfg.get('type') in TOPDOWN_POSE_MODELS else None

    def kept_recipe_note(self, model_type: str) -> str:
        return (f'{model_type} is bottom-up: our pose family is top-down, so its own recipe '
                'is kept')

    def smoke_batches(self, cfg, model_cfg: Mapping, size: int, name: str,
                      batch: int = 2, classes: int = 3) -> Tuple[dict, List[dict]]:
        """The config's own pipelines' batches: codec targets, its input size
        (:func:`pose_batches`)."""
        return pose_batches(cfg, size, batch)


TOOLKIT = MMPose()
