"""The benchmark's tables: the lines the tool prints and the docs' sections made from its
records (``docs/records/*.jsonl``, rendered by ``tools/analysis/records_to_docs.py``).

Goals are not known here: a run writes the ratios it measured (and the goal each is held
against, where it has one) as rows of its own, and :func:`ratio_table` renders them.
"""
from typing import Dict, List, Optional, Sequence

from .records import machine_lines


def table_header(with_complexity: bool = False, compiled: bool = False,
                 saved: bool = False) -> List[str]:
    """The two header lines of the benchmark's table (its optional columns as asked)."""
    extra = [' params (M) | GMACs / image |'] * with_complexity
    extra += [' compile s | graphs |'] * compiled
    extra += [' saved MiB, batch 1 | saved MiB / image, batch 2 |'] * saved
    cols = ''.join(extra)
    return [f'| model | case | dtype | compiled | ms / batch | images/s | peak MB |{cols}',
            '|---|---|---|---|---|---|---|' + '---|' * cols.count('|')]


def row_name(row: dict) -> str:
    """The model's name in a table line: the arch, with the path and ``with_cp`` where they
    are not the default (plain rows keep the arch alone)."""
    notes = [] if row['attn_impl'] in ('auto', '-', 'config') else [row['attn_impl']]
    notes += ['with_cp'] * bool(row.get('with_cp'))
    return row['arch'] + (f" ({', '.join(notes)})" if notes else '')


def format_row(row: dict, with_complexity: bool = False, compiled: bool = False,
               saved: bool = False) -> str:
    """One table line of a row of :func:`summarise` (columns as :func:`table_header`)."""
    def num(key: str, fmt: str) -> str:
        return format(row[key], fmt) if key in row else '-'
    cols = ''
    if with_complexity:
        cols += f" {num('params_m', '.2f')} | {num('gmacs', '.2f')} |"
    if compiled:
        cols += f" {num('compile_s', '.1f')} | {num('graphs', 'd')} |"
    if saved:
        cols += f" {num('saved_mib_batch1', '.1f')} | {num('saved_mib_per_image', '.1f')} |"
    return (f"| {row_name(row)} | {row['case']} | {row['dtype']} | {row['compiled']} | "
            f"{1e3 * row['seconds']:.1f} | {row['images_per_s']:.1f} | "
            f"{num('peak_mem_mb', '.0f')} |{cols}")



# ------------------------------------------------------------------ the docs' sections
def _key(row: dict) -> tuple:
    return (row['arch'], row.get('attn_impl'), row['case'], row['dtype'],
            bool(row.get('with_cp')))


def _ms(sec: float) -> str:
    return f'{1e3 * sec:.1f}'


def compile_section(rows: Sequence[dict]) -> List[str]:
    """The compile section of the docs from a run's records (the rows ``--jsonl`` wrote):
    the device and its measured fp32 matmul peak, eager and compiled times side by side;
    a later row of a case replaces an earlier (saved bytes: :func:`memory_section`).

    Args:
        rows (Sequence[dict]): benchmark rows (with ``device``, ``torch`` and the run's
            ``matmul_gflops_per_s`` / ``matmul_n`` where the run measured it).

    Returns:
        list[str]: markdown lines.
    """
    timed: Dict[tuple, Dict[bool, dict]] = {}
    ratios = [r for r in rows if 'ratio' in r]
    rows = [r for r in rows if 'arch' in r]
    for r in rows:
        if 'seconds' in r:
            timed.setdefault(_key(r), {})[bool(r['compiled'])] = r
    lines = machine_lines(rows, note=_matmul_note)
    pairs = [(k, v) for k, v in timed.items() if True in v]
    if pairs:
        lines += ['', '| model | case | dtype | eager ms | compiled ms | eager / compiled | '
                  'compile s | graphs | GFLOP/s, eager / compiled | of fp32 matmul peak |',
                  '|---|---|---|---|---|---|---|---|---|---|']

        def rate(r: Optional[dict]) -> str:
            return '-' if r is None or _gflops(r) is None else f'{_gflops(r):.1f}'

        def share(r: Optional[dict]) -> str:
            peak = None if r is None else r.get('matmul_gflops_per_s')  # its own run's
            return ('-' if peak is None or _gflops(r) is None
                    else f'{100 * _gflops(r) / peak:.0f}%')
        for key, v in pairs:
            c, e = v[True], v.get(False)
            lines.append(f"| {row_name(c)} | {c['case']} | {c['dtype']} | "
                         f"{_ms(e['seconds']) if e else '-'} | {_ms(c['seconds'])} | "
                         f"{(e['seconds'] / c['seconds']) if e else float('nan'):.2f} | "
                         f"{c.get('compile_s', float('nan')):.0f} | {c.get('graphs', '-')} | "
                         f"{rate(e)} / {rate(c)} | {share(e)} / {share(c)} |")
    return lines + ratio_table(ratios)


def memory_section(rows: Sequence[dict]) -> List[str]:
    """The training-memory section from a saved-bytes run's records (``--saved-only`` and
    the goal ratios it wrote): one line per pair of models a goal compares and input
    size, both models' saved MiB (batch 1, and per image at batch 2), their ratios and the
    goal.

    Args:
        rows (Sequence[dict]): saved-bytes rows and their goal ratios (``'<a> / <b>,
            saved bytes'``, with fields ``num``, ``den``, ``hw`` and ``batch``).

    Returns:
        list[str]: markdown lines.
    """
    saved = {(r['arch'], tuple(r['shape'][2:])): r for r in rows
             if 'saved_mib_per_image' in r and not r.get('with_cp')}
    pairs: Dict[tuple, Dict[int, dict]] = {}  # (num, den, hw) -> batch -> ratio row
    for r in rows:
        if 'ratio' in r and r['what'].endswith(', saved bytes'):
            pairs.setdefault((r['num'], r['den'], tuple(r['hw'])), {})[r['batch']] = r
    lines = machine_lines([r for r in rows if 'arch' in r], note=_matmul_note) + [
        '', '| models | H x W | saved MiB, batch 1 | ratio | saved MiB / image, batch 2 | '
        'ratio | goal: at most | met |', '|---|---|---|---|---|---|---|---|']
    for (num, den, hw), got in pairs.items():
        a, b = saved.get((num, hw)), saved.get((den, hw))
        if a is None or b is None or set(got) != {1, 2}:
            continue
        met = 'yes' if got[1]['met'] and got[2]['met'] else '**no**'
        lines.append(f"| {num} / {den} | {hw[0]} x {hw[1]} | {a['saved_mib_batch1']:.0f} / "
                     f"{b['saved_mib_batch1']:.0f} | {got[1]['ratio']:.2f} | "
                     f"{a['saved_mib_per_image']:.0f} / {b['saved_mib_per_image']:.0f} | "
                     f"{got[2]['ratio']:.2f} | {got[1]['bound']} | {met} |")
    return lines


def _gflops(row: dict) -> Optional[float]:
    """The multiply-add rate an inference row achieved (2 FLOPs per MAC; ``gmacs`` is per
    image, from ``--complexity``); None for training rows or without a count."""
    if 'gmacs' not in row or row['case'].startswith('train'):
        return None
    return 2 * row['gmacs'] * row['images_per_s']


def _matmul_note(row: dict) -> str:
    """What a row's run says of itself for its machine line: date, commit and the fp32
    matmul rate it measured ('' where none)."""
    notes = [f"{row['date']}, commit {row.get('commit', '?')}"] if 'date' in row else []
    if 'matmul_gflops_per_s' in row:
        n = row.get('matmul_n', '?')
        notes.append(f"fp32 matmul {row['matmul_gflops_per_s']:.1f} GFLOP/s ({n} x {n}, "
                     'TF32 off), measured in the same run')
    return '; '.join(notes)


def ratio_table(rows: Sequence[dict]) -> List[str]:
    """The ratios a run wrote (``tools/analysis/benchmark.py``: its goals and ``--ratio``
    rows), each read within that run: what over what, the case, the median over the
    run's interleaved rounds, and the goal where the row names one; a later row of the
    same ratio and case replaces an earlier.

    Args:
        rows (Sequence[dict]): rows with ``ratio``, ``what`` and ``case``, optionally
            ``bound`` (the goal: at most) and ``met``.

    Returns:
        list[str]: markdown lines ('' first), none without rows.
    """
    latest = {(r['what'], r['case'], r.get('dtype')): r for r in rows}
    if not latest:
        return []
    lines = ['', '| ratio | case | value | goal: at most | met |', '|---|---|---|---|---|']
    for r in latest.values():
        goal = r.get('bound')
        lines.append(f"| {r['what']} | {r['case']} | {r['ratio']:.2f} | "
                     f"{'-' if goal is None else goal} | "
                     f"{'-' if goal is None else ('yes' if r['met'] else '**no**')} |")
    return lines


def table_section(rows: Sequence[dict]) -> List[str]:
    """A docs section from a run's records: the device line(s) and the tool's own table
    (the columns the rows have); a later row of a case replaces an earlier.

    Args:
        rows (Sequence[dict]): benchmark rows, as ``--jsonl`` wrote them.

    Returns:
        list[str]: markdown lines.
    """
    latest: Dict[tuple, dict] = {}
    ratios = [r for r in rows if 'ratio' in r]
    for r in rows:
        if 'seconds' in r and 'arch' in r:
            latest[_key(r) + (bool(r['compiled']), tuple(r['shape']))] = r
    kept = list(latest.values())
    columns = dict(with_complexity=any('params_m' in r for r in kept),
                   compiled=any(r['compiled'] for r in kept),
                   saved=any('saved_mib_per_image' in r for r in kept))
    return (machine_lines(kept, note=_matmul_note) + [''] + table_header(**columns)
            + [format_row(r, **columns) for r in kept] + ratio_table(ratios))


__all__ = ['compile_section', 'format_row', 'memory_section', 'ratio_table', 'row_name',
           'table_header', 'table_section']
