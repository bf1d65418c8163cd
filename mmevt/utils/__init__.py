"""Helpers mmevt's own modules share (checkpoints' weights, sample images, user errors,
lists). What mmevt changes in other libraries is :mod:`mmevt.patches`."""
