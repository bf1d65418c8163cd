"""The docs tables that list archs are the tools' output, so a new arch cannot leave a stale
table: regenerate them with the commands named in the docs."""
import os.path as osp
import re
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


def test_method_doc_describes_every_mixer_and_layout_of_the_tables():
    # the list of "Which tokens meet" stays by hand: checked against the code's tables
    from mmevt.models.layers import ATTN_MODES, MIXERS
    with open(METHOD) as f:
        section = f.read().split('## Which tokens meet')[1].split('\n## ')[0]
    named = set(re.findall(r"`(?:mode=|mixers=)?'?([a-z_]+)'?`", section))
    missing = (set(MIXERS) | set(ATTN_MODES)) - named
    assert not missing, f'docs/method.md does not describe {sorted(missing)}'
    stale = set(re.findall(r"`(?:mode|mixers)='([a-z_]+)'`", section)) - set(MIXERS)
    assert not stale, f'docs/method.md describes {sorted(stale)}, which are no mixers'


def test_arch_settings_table_in_method_doc():
    want = complexity.settings_table()
    assert doc_table(METHOD, want[0]) == want


def test_model_zoo_complexity_table_is_the_tools_output(zoo_counts):
    want = complexity.complexity_table(zoo_counts)
    assert doc_table(MODEL_ZOO, want[0]) == want


def test_model_zoo_breakdown_table_is_the_tools_output(zoo_counts):
    want = complexity.breakdown_table({a: zoo_counts[a] for a in complexity.BREAKDOWN_ARCHS})
    assert doc_table(MODEL_ZOO, want[0]) == want


def test_the_docs_hold_what_the_tools_write_mode_writes(zoo_counts):
    # `complexity.py --write` leaves the committed docs as they are (--check passes); the
    # fvcore table needs fvcore runs (minutes): its rows are checked below
    assert complexity.write_docs(complexity.docs_tables(zoo_counts), check=True) == []


def test_write_mode_replaces_only_what_is_between_a_tables_markers(tmp_path):
    begin, end = complexity.table_markers('settings')
    text = f'intro\n\n{begin}\n\n| old |\n|---|\n\n{end}\n\nafter\n'
    got = complexity.splice_tables(text, {'settings': ['| new |', '|---|', '| row |']})
    assert got == f'intro\n\n{begin}\n\n| new |\n|---|\n| row |\n\n{end}\n\nafter\n'
    assert complexity.splice_tables(got, {'settings': ['| new |', '|---|', '| row |']}) == got
    for bad in ('no markers\n', f'{end}\n{begin}\n', f'{begin}\n{end}\n{begin}\n{end}\n'):
        with pytest.raises(ValueError, match='needs the settings table between'):
            complexity.splice_tables(bad, {'settings': []})
    doc = tmp_path / 'docs' / 'method.md'  # write_docs writes into the checkout it is given
    doc.parent.mkdir()
    doc.write_text(text)
    tables = {'settings': ['| new |', '|---|']}
    assert complexity.write_docs(tables, str(tmp_path), check=True) == ['docs/method.md']
    assert doc.read_text() == text
    assert complexity.write_docs(tables, str(tmp_path)) == ['docs/method.md']
    assert complexity.write_docs(tables, str(tmp_path), check=True) == []


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
