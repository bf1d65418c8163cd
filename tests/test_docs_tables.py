"""The docs tables that list archs are the tools' output, so a new arch cannot leave a stale
table: regenerate them with the commands named in the docs."""
import os.path as osp
import re
from typing import List

import pytest

from helpers import REPO, load_tool

complexity = load_tool('tools/analysis/complexity.py')
records_to_docs = load_tool('tools/analysis/records_to_docs.py')
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
        with pytest.raises(ValueError, match=r'\(the settings table\) needs one'):
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


# ------------------------------------------------------- the measured tables (docs/records)
def test_every_measured_table_is_its_records_output():
    # regenerate: python tools/analysis/records_to_docs.py
    sections, write_docs = records_to_docs.sections, records_to_docs.write_docs
    assert {'latency', 'compile', 'ablations-224', 'onnx', 'deploy', 'demo'} <= set(sections(REPO))
    assert write_docs(REPO, check=True) == []


def test_records_to_docs_writes_each_section_and_refuses_what_it_cannot(tmp_path):
    import json

    section_markers, write_docs = records_to_docs.section_markers, records_to_docs.write_docs
    (tmp_path / 'docs' / 'records').mkdir(parents=True)
    (tmp_path / 'README.md').write_text('front\n')
    begin, end = section_markers('demo')
    page = tmp_path / 'docs' / 'demo.md'
    page.write_text(f'intro\n{begin}\nold\n{end}\nafter\n')
    with pytest.raises(ValueError, match=r"sections without records: \['demo'\]"):
        write_docs(str(tmp_path))
    run = dict(det={'coco/bbox_mAP': 0.5}, seg={'mIoU': 50.0}, background_only_mIoU=20.0,
               minutes=31.2, num_train=4, num_val=2, det_epochs=1, seg_iters=3,
               device='CPU (X, 2 threads)', torch='2.x')
    records = tmp_path / 'docs' / 'records' / 'demo.jsonl'
    records.write_text(json.dumps(dict(run, minutes=99.0)) + '\n' + json.dumps(run) + '\n')
    assert write_docs(str(tmp_path), check=True) == ['docs/demo.md']
    assert 'old' in page.read_text()  # --check writes nothing
    assert write_docs(str(tmp_path)) == ['docs/demo.md']
    text = page.read_text()
    assert text.startswith(f'intro\n{begin}\n\n- CPU (X, 2 threads), torch 2.x\n')
    assert text.endswith(f'\n\n{end}\nafter\n') and 'old' not in text
    # the last run's table
    assert '| Mask R-CNN, EVT | coco/bbox_mAP | 0.500 |' in text and '31 min' in text
    assert write_docs(str(tmp_path), check=True) == []
    (tmp_path / 'docs' / 'records' / 'lost.jsonl').write_text('{}\n')
    with pytest.raises(ValueError, match=r"records without a section: \['lost'\]"):
        write_docs(str(tmp_path))
    (tmp_path / 'docs' / 'records' / 'lost.jsonl').unlink()
    with pytest.raises(ValueError, match=r"no page holds the sections \['onnx'\]"):
        write_docs(str(tmp_path), only=['onnx'])
    (tmp_path / 'README.md').write_text(f'{begin}\n{end}\n')
    with pytest.raises(ValueError, match="section 'demo' is in README.md and docs/demo.md"):
        write_docs(str(tmp_path))


def test_the_deployment_sections_say_timing_and_parity_per_config():
    deploy_section, onnx_section = records_to_docs.deploy_section, records_to_docs.onnx_section
    section_lines = records_to_docs.section_lines
    machine = dict(device='CPU (X, 1 threads)', torch='2.x', onnxruntime='1.0', mmdeploy='1.3')
    onnx = [dict(machine, config='configs/a.py', kind='model', shape=[224, 224],
                 max_abs_diff=7.3e-7, ort_ms=80.0, torch_ms=100.0, threads=1, rounds=20)]
    lines = onnx_section(onnx + [dict(onnx[0], ort_ms=50.0)])  # a later row replaces
    assert lines[0] == '- CPU (X, 1 threads), torch 2.x, onnxruntime 1.0'
    assert lines[-1] == ('| `configs/a.py` | model | 224 x 224 | 1 | 50.0 | 100.0 | 2.00 | '
                         '7.3e-07 |')
    assert len(lines) == 5
    det = dict(machine, config='configs/d.py', deploy_config='configs/deploy/x.py',
               shape=[800, 1344], ort_ms=4000.0, torch_ms=5000.0, threads=1, rounds=3,
               graph=dict(detections=100, matched=100, unmatched=0, degenerate=0, box=1.6e-6,
                          score=1.2e-7),
               toolkit=dict(detections=100, matched=83, unmatched=0, degenerate=17, box=0.,
                            score=0.))
    seg = dict(machine, config='configs/s.py', deploy_config='configs/deploy/y.py',
               graph=dict(class_map=0.0), toolkit=dict(class_map=0.002))  # --verify only
    lines = deploy_section([det, seg])
    assert lines[0].endswith('onnxruntime 1.0, mmdeploy 1.3')
    assert lines[-2] == ('| `configs/d.py` | 800 x 1344 | 1 | 4000.0 | 5000.0 | 1.25 | '
                         'boxes 1.6e-06 of the longer side, scores 1.2e-07, 100 of 100 '
                         'detections matched | boxes 0.0e+00 of the longer side, scores '
                         '0.0e+00, 83 of 100 detections matched, 17 empty boxes |')
    assert lines[-1] == ('| `configs/s.py` | - | - | - | - | - | pixels of another class '
                         '0.0% | pixels of another class 0.2% |')
    with pytest.raises(ValueError, match="no renderer for docs section 'nope'"):
        section_lines('nope', onnx)
    with pytest.raises(ValueError, match="docs section 'onnx' has no records"):
        section_lines('onnx', [])


def test_every_model_of_the_zoo_has_its_counts_and_they_are_the_tools():
    # make_metafile.py records each config's FLOPs and Parameters in its metafile (counting
    # all of them takes minutes); one is counted again here: the EVT-T classifier, and a
    # detector's backbone is the arch's backbone at the detector's size
    zoo = load_tool('tools/misc/make_metafile.py')
    assert zoo.uncounted(REPO) == [], 'run tools/misc/make_metafile.py'
    name = 'evt-t_8xb128_in1k'
    recorded = zoo.recorded_counts(REPO)[name]
    assert zoo.count_config(osp.join(REPO, 'configs', 'cls', 'evt', f'{name}.py')) == recorded
    # and the classifier's count is the arch table's (the same model, built another way)
    rows = complexity.complexity_rows(['evt-t'], (224, 224))
    assert recorded == dict(FLOPs=rows['evt-t']['macs'], Parameters=rows['evt-t']['params'])
    det = zoo.recorded_counts(REPO)['mask-rcnn_evt-t_fpn_1x_coco']
    rows = complexity.complexity_rows(['evt-t'], (800, 1280))
    assert det == dict(FLOPs=rows['evt-t']['backbone_macs'],
                       Parameters=rows['evt-t']['backbone_params'])
