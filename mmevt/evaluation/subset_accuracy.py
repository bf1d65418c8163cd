"""Accuracy of an ImageNet-1k classifier on a 200-class subset (ImageNet-A, ImageNet-R).

Those test sets label images with 200 of the 1000 ImageNet classes; the standard protocol
keeps the model's 1000 logits, restricts them to the 200 classes the set uses, and takes the
arg-max among those. The subset is read from WordNet ids: the dataset's class folders
(``n01443537`` ...) located in the 1000 ImageNet-1k ids (sorted, the usual label order).
"""
import os
import os.path as osp
from typing import List, Optional, Sequence, Union

import torch
from mmpretrain.evaluation import Accuracy


def _wnids(source: Union[str, Sequence[str]]) -> List[str]:
    """WordNet ids from a list, a text file (one per line, first column) or a directory
    of class folders (sorted)."""
    if not isinstance(source, str):
        return list(source)
    if osp.isdir(source):
        return sorted(d for d in os.listdir(source) if osp.isdir(osp.join(source, d)))
    if osp.isfile(source):
        with open(source) as f:
            return [line.split()[0] for line in f if line.strip()]
    raise FileNotFoundError(f'wnid source {source!r} is neither a directory nor a file')


def subset_indices(subset_wnids: Union[str, Sequence[str]],
                   imagenet_wnids: Union[str, Sequence[str]]) -> List[int]:
    """ImageNet-1k index of each subset class, in the subset's (sorted) label order.

    Args:
        subset_wnids: the subset's class folders (a directory), a file or a list.
        imagenet_wnids: the 1000 ImageNet-1k ids (e.g. ``data/imagenet/train``), in label
            order when given as a file or list; a directory is sorted.

    Returns:
        list[int]: ``indices[label]`` is the 1k class of subset label ``label``.
    """
    sub, full = _wnids(subset_wnids), _wnids(imagenet_wnids)
    sub = sorted(sub) if isinstance(subset_wnids, str) and osp.isdir(subset_wnids) else sub
    pos = {w: i for i, w in enumerate(full)}
    missing = [w for w in sub if w not in pos]
    if missing:
        raise ValueError(f'{len(missing)} subset classes are not ImageNet-1k classes, e.g. '
                         f'{missing[:3]}; check imagenet_wnids ({len(full)} ids given)')
    return [pos[w] for w in sub]


class SubsetAccuracy(Accuracy):
    """Top-k accuracy after restricting 1000-way scores to a subset of classes.

    Args:
        subset_wnids (str | list[str]): the subset's classes (see :func:`subset_indices`).
        imagenet_wnids (str | list[str]): the 1000 ImageNet-1k ids in label order.
        indices (list[int], optional): the 1k indices directly, instead of the two above.
        **kwargs: ``topk``, ``thrs``, ``prefix`` ... of mmpretrain's ``Accuracy``.
    """

    def __init__(self,
                 subset_wnids: Optional[Union[str, Sequence[str]]] = None,
                 imagenet_wnids: Optional[Union[str, Sequence[str]]] = None,
                 indices: Optional[Sequence[int]] = None,
                 **kwargs):
        super().__init__(**kwargs)
        if indices is None:
            if subset_wnids is None or imagenet_wnids is None:
                raise ValueError('SubsetAccuracy needs indices, or subset_wnids and '
                                 'imagenet_wnids')
            indices = subset_indices(subset_wnids, imagenet_wnids)
        self.indices = torch.as_tensor(list(indices), dtype=torch.long)

    def process(self, data_batch, data_samples: Sequence[dict]):
        for sample in data_samples:
            if 'pred_score' not in sample:
                raise ValueError('SubsetAccuracy needs pred_score (the model\'s 1000 scores)')
            score = sample['pred_score'].cpu()
            if score.numel() <= int(self.indices.max()):
                raise ValueError(f'the model gives {score.numel()} scores; the subset needs '
                                 f'index {int(self.indices.max())}')
            self.results.append(dict(pred_score=score[self.indices],
                                     gt_label=sample['gt_label'].cpu()))
