"""The docs tables that list archs are the tools' output, so a new arch cannot leave a stale
table: regenerate them with the commands named in the docs."""
import os.path as osp
from typing import List

import pytest

from helpers import REPO, load_tool

complexity = load_tool('tools/analysis/complexity.py')
MODEL_ZOO = osp.join(REPO, 'docs', 'model_zoo.md')
METHOD = osp.join(REPO, 'docs', 'method.md')


def doc_table(path: str, header: str) -> List[str]:
    """The markdown table of ``path`` that starts with the line ``header``."""
    with open(path) as f:
        lines = f.read().splitlines()
    assert header in lines, f'{osp.basename(path)} has no table headed {header!r}'
    start = lines.index(header)
    table = []
    for line in lines[start:]:
        if not line.startswith('|'):
            break
        table.append(line)
    return table


def test_arch_settings_table_in_method_doc():
    want = complexity.settings_table()
    assert doc_table(METHOD, want[0]) == want


def test_model_zoo_complexity_table_is_the_tools_output(zoo_counts):
    want = complexity.complexity_table(zoo_counts)
    assert doc_table(MODEL_ZOO, want[0]) == want


def test_model_zoo_breakdown_table_is_the_tools_output(zoo_counts):
    want = complexity.breakdown_table({a: zoo_counts[a] for a in complexity.BREAKDOWN_ARCHS})
    assert doc_table(MODEL_ZOO, want[0]) == want


def test_the_tools_counts_are_model_complexity():
    # the tool counts each classifier once and takes the backbone as classifier less head
    import torch

    from mmevt.analysis import model_complexity
    rows = complexity.complexity_rows(['evt-test', 'rmt-test+linear'], (64, 96))
    for name, head in (('evt-test', 'rmt'), ('rmt-test+linear', 'linear')):
        with torch.device('meta'):
            want = model_complexity(name.replace('+linear', ''), (64, 96), head=head)
        assert {k: rows[name][k] for k in want} == want


def test_fvcore_table_lists_the_same_archs():
    # fvcore traces real tensors (minutes for all archs): the values are the tool's
    # `--fvcore` run, checked here for its rows; tests/test_complexity.py checks fvcore itself
    fv = doc_table(MODEL_ZOO, complexity.fvcore_table({})[0])
    assert [line.split('|')[1].strip() for line in fv[2:]] == list(complexity.ARCHS)
    assert all(len(line.split('|')) == 5 for line in fv)
