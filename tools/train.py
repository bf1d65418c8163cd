#!/usr/bin/env python
"""Train an mmevt config with its toolkit's own tools/train.py (chosen from default_scope).

Usage: python tools/train.py CONFIG [toolkit options ...]
"""
from mmevt.apis import run_toolkit_tool

if __name__ == '__main__':
    run_toolkit_tool('train')
