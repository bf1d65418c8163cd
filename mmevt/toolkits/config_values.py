"""Config values as mmevt reads them: plain containers (one-or-many as a list is
:func:`mmevt.utils.lists.as_list`), and the training pipelines through dataset wrappers."""
from typing import Any, List


def to_plain(value: Any) -> Any:
    """``ConfigDict`` / nested containers -> plain dicts and lists (tuples kept).

    Args:
        value (Any): a config value (a ``ConfigDict``, list, tuple or a leaf).

    Returns:
        Any: the same value made of plain ``dict`` / ``list`` / ``tuple`` (leaves shared).
    """
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_plain(v) for v in value)
    return value


def _dataset_pipelines(dataset: Any) -> List[list]:
    """The pipelines a dataset config's samples go through, one per dataset it reads: a
    wrapper's own ``pipeline`` (mmdet's ``MultiImageMixDataset``) after its inner
    dataset's (``dataset``: ``RepeatDataset``, ``ClassBalancedDataset`` ...; ``datasets``:
    ``ConcatDataset``, one each); empty where none has a pipeline."""
    if not isinstance(dataset, dict):
        return []
    inner = dataset.get('datasets') if isinstance(dataset.get('datasets'), (list, tuple)) \
        else [dataset.get('dataset')]
    pipelines = [p for d in inner for p in _dataset_pipelines(d)]
    own = list(dataset.get('pipeline') or [])
    return [p + own for p in pipelines] if pipelines else ([own] if own else [])


def training_pipelines(cfg) -> List[list]:
    """The training pipelines of ``cfg``: its train dataloader's dataset's, through wrappers
    (one per dataset a ``ConcatDataset`` reads; a wrapper's own pipeline after its inner
    dataset's), else ``[train_pipeline]`` (the top-level one); empty if there is none."""
    found = _dataset_pipelines((cfg.get('train_dataloader') or {}).get('dataset'))
    fallback = list(cfg.get('train_pipeline') or [])
    return found or ([fallback] if fallback else [])


def training_pipeline(cfg) -> list:
    """The (first) training pipeline of ``cfg`` (:func:`training_pipelines`); empty if none."""
    return next(iter(training_pipelines(cfg)), [])
