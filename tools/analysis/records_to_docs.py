#!/usr/bin/env python
"""Rewrite the docs' measured tables from the records in ``docs/records/``.

    python tools/analysis/records_to_docs.py           # every section of every page
    python tools/analysis/records_to_docs.py demo onnx # only these sections
    python tools/analysis/records_to_docs.py --check   # exit 1 naming the pages that differ

A section ``NAME`` is written from ``docs/records/NAME.jsonl`` (what the measuring
command's ``--jsonl`` appended); the logic is ``tools/analysis/docs_sections.py``.
"""
import argparse
import os.path as osp
import sys
from typing import List, Optional

from mmevt.utils.user_errors import exit_on_user_error

# docs_sections.py beside this file: the docs' tables are project code, not the package's
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from docs_sections import COMMAND, write_docs  # noqa: E402

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('sections', nargs='*', help='section names (default: all)')
    parser.add_argument('--check', action='store_true', help='write nothing; exit 1 when a '
                        'page differs from its records')
    args = parser.parse_args(argv)
    changed = write_docs(REPO, args.check, args.sections or None)
    if args.check and changed:
        sys.exit(f"stale sections in {', '.join(changed)}: run {COMMAND}")
    print(f"wrote {', '.join(changed)}" if changed and not args.check
          else 'the docs sections are up to date')


if __name__ == '__main__':
    exit_on_user_error(main, 'records_to_docs')
