"""Generated batches for the smoke test of an mmpose config, made by its own pipelines.

A pose model's targets come from its codec (heatmaps, SimCC vectors, bottom-up maps) and
some heads flatten a map of the config's input size (``in_featuremap_size``), so the batch
is not drawn at random as for the other toolkits: a few images of
:func:`mmevt.datasets.generate_keypoints` go through the config's own training pipeline
(the training batch) and test pipeline (the prediction batch), without their random
augmentations (:data:`KEPT_STEPS`: geometry, targets and packing only; augmentations may
need optional packages, e.g. RTMPose's ``Albumentation``).
"""
import contextlib
import io
import tempfile
from typing import Any, List, Tuple

from ..toolkits import toolkit_scope
from .values import to_plain

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
        from mmpose.registry import DATASETS
        paths = generate_keypoints(root, batch, batch, (size, size), seed=0)
        for split, pipeline in steps.items():
            dataset = DATASETS.build(dict(
                type='CocoDataset', data_root=root, data_mode=mode,
                ann_file=paths[f'keypoints_{split}'], data_prefix=dict(img=f'images/{split}/'),
                test_mode=split == 'validation', pipeline=pipeline))
            out.append([dataset[i] for i in range(batch)])
    train, test = out
    if mode == 'bottomup':
        return pseudo_collate(train), [pseudo_collate([item]) for item in test]
    return pseudo_collate(train), [pseudo_collate(test)]
