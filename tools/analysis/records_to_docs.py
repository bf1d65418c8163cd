#!/usr/bin/env python
"""Rewrite the docs' measured tables from the records in ``docs/records/``.

    python tools/analysis/records_to_docs.py           # every section of every page
    python tools/analysis/records_to_docs.py demo onnx # only these sections
    python tools/analysis/records_to_docs.py --check   # exit 1 naming the pages that differ

A section ``NAME`` is written from ``docs/records/NAME.jsonl`` (what the measuring
command's ``--jsonl`` appended). The other tools that write a table (``checkpointing.py``,
``write_cost.py``, ``complexity.py``, ``tools/demo.py``) import it from here: project code,
not the package's (users never run it from the wheel).

What this project measured (latencies, parity, the demo's metrics) appears in the docs only
as tables a command writes from records. A page holds each table between two comment lines::

    <!-- NAME section: written by tools/analysis/records_to_docs.py -->
    ...
    <!-- end of NAME section -->

and ``docs/records/NAME.jsonl`` holds the rows the measuring command appended with its
``--jsonl`` option (``tools/analysis/benchmark.py``, ``checkpointing.py``,
``write_cost.py``, ``mmevt-onnx``, ``mmevt-deploy``, ``tools/demo.py``). :func:`write_docs`
rewrites every section of every page from its records (``--check``: says which differ,
writes nothing; a test runs it). :data:`RENDERERS` says how a section's rows become lines.
"""
import argparse
import glob
import os.path as osp
import re
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from mmevt.analysis.records import machine_lines, read_rows
from mmevt.utils.user_errors import exit_on_user_error

COMMAND = 'tools/analysis/records_to_docs.py'
RECORDS = osp.join('docs', 'records')
BEGIN = re.compile(r'^<!-- ([\w-]+) section: written by ' + re.escape(COMMAND) + r' -->$', re.M)


def section_markers(name: str) -> Tuple[str, str]:
    """The two lines (markdown comments) a page holds section ``name`` between."""
    return (f'<!-- {name} section: written by {COMMAND} -->', f'<!-- end of {name} section -->')


def splice(text: str, lines: Sequence[str], markers: Tuple[str, str],
           where: str = 'the text') -> str:
    """``text`` with ``lines`` put between two marker lines (what was there goes): how every
    generated table of the docs is written, these sections and the complexity tables.

    Args:
        text (str): the page.
        lines (Sequence[str]): the new content.
        markers (tuple[str, str]): the line before and the line after it.
        where (str): the page's name in the error. Defaults to 'the text'.

    Raises:
        ValueError: ``text`` lacks the markers, holds them twice or in the wrong order.
    """
    begin, end = markers
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(end) < text.index(begin):
        raise ValueError(f'{where} needs one {begin!r} line and one {end!r} after it')
    head, rest = text.split(begin)
    return head + begin + '\n\n' + '\n'.join(lines) + '\n\n' + end + rest.split(end)[1]


def rewrite_page(path: str, edit: Callable[[str], str], check: bool = False) -> bool:
    """Apply ``edit`` to the text of the page ``path``; write it back when it changed,
    unless ``check``. Returns whether it changed (with ``check``: differs)."""
    with open(path) as f:
        old = f.read()
    new = edit(old)
    if new != old and not check:
        with open(path, 'w') as f:
            f.write(new)
    return new != old


def splice_section(text: str, lines: Sequence[str], name: str) -> str:
    """``text`` with ``lines`` as section ``name`` (:func:`splice` between its markers)."""
    return splice(text, lines, section_markers(name), f'section {name!r}')


def _latest(rows: Sequence[dict], key: Callable[[dict], tuple]) -> List[dict]:
    """``rows`` with a later row of the same ``key`` replacing an earlier one (a measurement
    taken again), in the order the keys first came."""
    return list({key(r): r for r in rows}.values())


def _timing(row: dict) -> str:
    """The threads, both medians and their ratio as table cells ('-' where not timed)."""
    if 'ort_ms' not in row:
        return '- | - | - | -'
    return (f"{row['threads']} | {row['ort_ms']:.1f} | {row['torch_ms']:.1f} | "
            f"{row['torch_ms'] / row['ort_ms']:.2f}")


def _hw(row: dict) -> str:
    """The input size as a table cell ('-' where not recorded)."""
    return f"{row['shape'][0]} x {row['shape'][1]}" if 'shape' in row else '-'


def _worst(stats: dict) -> str:
    """A parity result (:func:`mmevt.deploy.parity.compare`'s keys) in a few words."""
    words = {'box': 'boxes {:.1e} of the longer side', 'score': 'scores {:.1e}',
             'mask': 'mask probabilities {:.1e}', 'probability': 'class scores {:.1e}',
             'class_map': 'pixels of another class {:.1%}', 'top1': 'top-1 changed {:.1%}'}
    parts = [fmt.format(stats[k]) for k, fmt in words.items() if k in stats]
    if 'detections' in stats:
        parts.append(f"{stats['matched']} of {stats['detections']} detections matched"
                     + (f", {stats['unmatched']} unmatched" if stats['unmatched'] else '')
                     + (f", {stats['degenerate']} empty boxes" if stats['degenerate'] else ''))
    return ', '.join(parts)


def onnx_section(rows: Sequence[dict]) -> List[str]:
    """``mmevt-onnx --verify --benchmark N --jsonl`` rows: onnxruntime against PyTorch eager
    per config and input size (a later row of a pair replaces an earlier)."""
    latest = _latest(rows, lambda r: (r['config'], r['kind'], tuple(r['shape'])))
    lines = machine_lines(latest, ('onnxruntime', )) + [
        '', '| config | exported | input (H x W) | threads | onnxruntime ms | PyTorch ms | '
        'PyTorch / onnxruntime | largest difference, batch 1 and 2 |',
        '|---|---|---|---|---|---|---|---|']
    for r in latest:
        diff = f"{r['max_abs_diff']:.1e}" if 'max_abs_diff' in r else '-'
        lines.append(f"| `{r['config']}` | {r['kind']} | {_hw(r)} | {_timing(r)} | {diff} |")
    return lines


def deploy_section(rows: Sequence[dict]) -> List[str]:
    """``mmevt-deploy --verify --benchmark N --jsonl`` rows: onnxruntime against PyTorch per
    model config, and the parity against both references (a later row replaces an
    earlier)."""
    latest = _latest(rows, lambda r: (r['config'], r['deploy_config']))
    lines = machine_lines(latest, ('onnxruntime', 'mmdeploy')) + [
        '', '| config | input (H x W) | threads | onnxruntime ms | PyTorch ms | '
        'PyTorch / onnxruntime | graph: largest difference | toolkit: agreement |',
        '|---|---|---|---|---|---|---|---|']
    for r in latest:
        graph, toolkit = (_worst(r.get(k, {})) or '-' for k in ('graph', 'toolkit'))
        lines.append(f"| `{r['config']}` | {_hw(r)} | {_timing(r)} | {graph} | {toolkit} |")
    return lines


def demo_table(run: dict) -> List[str]:
    """The summary table ``tools/demo.py`` prints at the end of a run (``run``: its
    ``summary.json``: ``det`` and ``seg`` metrics, ``background_only_mIoU``)."""
    lines = ['| model | metric | value |', '|---|---|---|']
    lines += [f'| Mask R-CNN, EVT | {k} | {v:.3f} |' for k, v in run['det'].items()]
    lines += [f'| Semantic FPN, EVT | {k} | {v:.2f} |' for k, v in run['seg'].items()]
    lines.append(f"| (background-only prediction) | mIoU | {run['background_only_mIoU']:.2f} |")
    return lines


def demo_section(rows: Sequence[dict]) -> List[str]:
    """``tools/demo.py --jsonl`` rows (what ``make demo`` runs, recorded): the last run's
    summary table."""
    r = rows[-1]
    return machine_lines([r]) + [
        f"- {r['num_train']} train / {r['num_val']} validation images, Mask R-CNN "
        f"{r['det_epochs']} epochs, Semantic FPN {r['seg_iters']} iterations; the whole run "
        f"took {r['minutes']:.0f} min", ''] + demo_table(r)


def _checkpointing_case(row: dict) -> tuple:
    return row['arch'], tuple(row['shape']), bool(row['with_cp'])


def checkpointing_table(rows: Sequence[dict]) -> List[str]:
    """``tools/analysis/checkpointing.py``'s table: each arch's training step with and
    without ``with_cp``, and the checkpointed one's time and memory over the plain one's (a
    later row of a case replaces an earlier)."""
    latest = {_checkpointing_case(r): r for r in rows}
    lines = ['| arch | batch x H x W | with_cp | ms / step | peak MB | time vs off | '
             'memory vs off |', '|---|---|---|---|---|---|---|']
    for (arch, shape, cp), r in latest.items():
        off = latest.get((arch, shape, False), r)
        lines.append(f"| {arch} | {shape[0]} x {shape[2]} x {shape[3]} | {cp} | "
                     f"{1e3 * r['seconds']:.0f} | {r['peak_mem_mb']:.0f} | "
                     f"{r['seconds'] / off['seconds']:.2f} | "
                     f"{r['peak_mem_mb'] / off['peak_mem_mb']:.2f} |")
    return lines


def checkpointing_section(rows: Sequence[dict]) -> List[str]:
    """``tools/analysis/checkpointing.py --jsonl`` rows: its table under the machine."""
    latest = _latest(rows, _checkpointing_case)
    return machine_lines(latest) + [''] + checkpointing_table(latest)


WRITES = {'dump': 'small json dump (put_text)', 'checkpoint': '4 MB checkpoint (put)'}


def write_cost_table(rows: Sequence[dict]) -> List[str]:
    """``tools/analysis/write_cost.py``'s table: the median time of each kind of write with
    mmevt's ``atomic-local-writes`` patch off and on (a later row of a kind replaces an
    earlier)."""
    latest = _latest(rows, lambda r: r['write'])
    lines = ['| write | mmengine (patch off) ms | atomic (patch on) ms | on / off |',
             '|---|---|---|---|']
    for r in latest:
        lines.append(f"| {WRITES.get(r['write'], r['write'])} | {1e3 * r['off_s']:.3f} | "
                     f"{1e3 * r['on_s']:.3f} | {r['on_s'] / r['off_s']:.2f} |")
    return lines


def write_cost_section(rows: Sequence[dict]) -> List[str]:
    """``tools/analysis/write_cost.py --jsonl`` rows: its table under the machine."""
    latest = _latest(rows, lambda r: r['write'])
    return machine_lines(latest) + [''] + write_cost_table(latest)


def _benchmark(name: str) -> Callable[[Sequence[dict]], List[str]]:
    def render(rows: Sequence[dict]) -> List[str]:
        from mmevt.analysis import benchmark_tables as tables
        special = dict(compile=tables.compile_section, memory=tables.memory_section)
        return special.get(name, tables.table_section)(rows)
    return render


# section name -> how its rows become lines (the benchmark's sections are its own tables)
RENDERERS: Dict[str, Callable[[Sequence[dict]], List[str]]] = {
    **{name: _benchmark(name) for name in ('latency', 'scaling', 'train', 'compile', 'memory',
                                           'ablations-224', 'ablations-512')},
    'onnx': onnx_section, 'deploy': deploy_section, 'demo': demo_section,
    'checkpointing': checkpointing_section, 'write-cost': write_cost_section}


def section_lines(name: str, rows: Sequence[dict]) -> List[str]:
    """The lines of section ``name`` from its records.

    Raises:
        ValueError: no renderer is known for ``name``, or it has no rows.
    """
    if name not in RENDERERS:
        raise ValueError(f'no renderer for docs section {name!r}; known: {sorted(RENDERERS)}')
    if not rows:
        raise ValueError(f'docs section {name!r} has no records')
    return RENDERERS[name](rows)


def pages(repo: str) -> List[str]:
    """The Markdown files of ``repo`` that may hold sections: the README and ``docs/``."""
    return [osp.join(repo, 'README.md')] + sorted(glob.glob(osp.join(repo, 'docs', '*.md')))


def sections(repo: str) -> Dict[str, str]:
    """Section name -> the page (relative to ``repo``) that holds it.

    Raises:
        ValueError: two pages hold the same section.
    """
    found: Dict[str, str] = {}
    for page in pages(repo):
        with open(page) as f:
            for name in BEGIN.findall(f.read()):
                if name in found:
                    raise ValueError(f'section {name!r} is in {found[name]} and '
                                     f'{osp.relpath(page, repo)}')
                found[name] = osp.relpath(page, repo)
    return found


def write_docs(repo: str, check: bool = False, only: Optional[Sequence[str]] = None
               ) -> List[str]:
    """Rewrite every section of ``repo``'s pages (or the sections ``only`` names) from
    ``docs/records/NAME.jsonl``.

    Args:
        repo (str): the source checkout.
        check (bool): only compare, write nothing. Defaults to False.
        only (Sequence[str], optional): section names. Defaults to None (all).

    Returns:
        list[str]: the pages (relative to ``repo``) that changed (with ``check``: differ).

    Raises:
        ValueError: a section written without records, a records file without a section
            (when all are written), or a name in ``only`` no page holds.
    """
    found = sections(repo)
    kept = {osp.splitext(osp.basename(p))[0]
            for p in glob.glob(osp.join(repo, RECORDS, '*.jsonl'))}
    names = list(only or found)
    unknown = [n for n in names if n not in found]
    if unknown:
        raise ValueError(f'no page holds the sections {unknown}; they are {sorted(found)}')
    missing, stray = sorted(set(names) - kept), sorted(kept - set(found)) if not only else []
    if missing or stray:
        raise ValueError(f'sections without records: {missing}; records without a section: '
                         f'{stray} (in {RECORDS})')
    def edit(page: str) -> Callable[[str], str]:
        def spliced(text: str) -> str:
            for name in (n for n in names if found[n] == page):
                rows = read_rows(osp.join(repo, RECORDS, f'{name}.jsonl'))
                text = splice_section(text, section_lines(name, rows), name)
            return text
        return spliced
    return [page for page in dict.fromkeys(found[n] for n in names)
            if rewrite_page(osp.join(repo, page), edit(page), check)]


__all__ = ['COMMAND', 'RENDERERS', 'checkpointing_section', 'checkpointing_table',
           'demo_section', 'demo_table', 'deploy_section', 'onnx_section',
           'rewrite_page', 'section_lines', 'section_markers', 'sections', 'splice',
           'splice_section', 'write_cost_section', 'write_cost_table', 'write_docs']


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
