"""Toolkit-side evaluation pieces (need mmpretrain; never imported by the model code)."""
from .subset_accuracy import SubsetAccuracy, subset_indices

__all__ = ['SubsetAccuracy', 'subset_indices']
