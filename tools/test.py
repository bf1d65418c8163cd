#!/usr/bin/env python
"""Test an mmevt config with its toolkit's own tools/test.py (chosen from default_scope).

Usage: python tools/test.py CONFIG CHECKPOINT [toolkit options ...]
"""
from mmevt.apis import run_toolkit_tool

if __name__ == '__main__':
    run_toolkit_tool('test')
