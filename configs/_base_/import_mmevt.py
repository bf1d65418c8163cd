# `import mmevt` while mmengine reads a config's bases: the FIRST base of every config of
# ours with a `mmdet::` / `mmseg::` / `mmpretrain::` / `mmpose::` / `mmaction::` base.
# mmengine runs each base file before it resolves the next one, and `custom_imports` only
# run after all bases are read; so without this line a toolkit's own tools/train.py
# resolves those bases with mmengine's own package look-up: upstream mmengine 0.10.7's
# needs `pkg_resources` (gone since setuptools 82), the fork's finds no distribution
# `mmsegmentation` (its is `onedl-mmsegmentation`). `import mmevt` replaces that look-up
# (mmevt/patches/config_resolution.py). A call, not an `import` statement: mmengine takes a
# file with `import` for a lazy-import (pure-Python) config and refuses it as a base. The
# call defines no variable, so nothing of this file is in the parsed config.
__import__('mmevt')
