"""Other projects' checkpoints converted to mmevt's models, as library functions.

One module per source project; its command line lives under ``tools/model_converters/``:

- :mod:`.rmt`: the RMT authors' ImageNet classifiers and mmdet 2.x / mmseg 0.x detectors and
  segmentors (:func:`convert_checkpoint`), with the key renames in :mod:`.rmt_keys`.
"""
from .rmt import convert_checkpoint

__all__ = ['convert_checkpoint']
