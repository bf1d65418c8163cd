#!/usr/bin/env python
"""Moved to tools/visualization/visualize_attention.py (beside vis_cam.py); this path runs it
with the same arguments, for one release."""
import importlib.util
import os.path as osp
import sys

_spec = importlib.util.spec_from_file_location(
    'visualize_attention',
    osp.join(osp.dirname(osp.abspath(__file__)), 'visualization', 'visualize_attention.py'))
_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tool)
main = _tool.main

if __name__ == '__main__':
    sys.exit(main())
