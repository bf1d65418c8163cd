"""The performance goals the benchmark's runs are held against, and the ratio rows a run
writes: each ratio read within one run, round by round where its rows were interleaved.

Used by ``tools/analysis/benchmark.py`` (its rows, ``--ratio``, ``--commits``); the docs
render the rows it writes (:func:`mmevt.analysis.benchmark_tables.ratio_table`). Goals are
the project's (issues 50 and 58), not code a user runs, so they live here.
"""
import statistics
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple


class Goal(NamedTuple):
    """``metric`` of model ``num`` over that of ``den``, at most ``bound``.

    Attributes:
        metric (str): ``'seconds'`` (time per batch) or ``'saved'`` (saved-for-backward
            MiB, at batch 1 and per image at batch 2: two ratios).
        num, den (tuple[str, bool]): ``(arch, compiled)`` of the two rows.
        bound (float): the goal, at most.
        hw (tuple[int, int], optional): only cases of this input size. Defaults to None.
        case (str, optional): only this case kind (``'b1'`` inference at batch 1,
            ``'train'``). Defaults to None.
    """
    metric: str
    num: Tuple[str, bool]
    den: Tuple[str, bool]
    bound: float
    hw: Optional[Tuple[int, int]] = None
    case: Optional[str] = None


DETECTION = (800, 1344)
GOALS: List[Goal] = [
    # saved-for-backward bytes (issue 58, item 1), at every size measured
    Goal('saved', ('evt-t', False), ('swin-t', False), 0.8),
    Goal('saved', ('evt-s', False), ('swin-s', False), 0.8),
    Goal('saved', ('evt-b', False), ('swin-b', False), 1.0),
    # the training step at detection size (item 2)
    Goal('seconds', ('evt-t', False), ('swin-t', False), 0.8, DETECTION, 'train'),
    Goal('seconds', ('evt-s', False), ('swin-t', False), 1.0, DETECTION, 'train'),
    # compile (item 3): faster than eager, and compiled EVT-T ahead of compiled Swin-T
    Goal('seconds', ('evt-t', True), ('evt-t', False), 0.9, (224, 224), 'b1'),
    Goal('seconds', ('evt-s', True), ('evt-s', False), 0.9, (224, 224), 'b1'),
    Goal('seconds', ('evt-t', True), ('evt-t', False), 0.9, (512, 512), 'train'),
    Goal('seconds', ('evt-t', True), ('swin-t', True), 0.8),
]


def _plain(row: dict) -> bool:
    """A row of a model as built by default (no other attention path, no with_cp)."""
    return row.get('attn_impl', '-') in ('auto', '-') and not row.get('with_cp')


def _kind(row: dict) -> str:
    return 'train' if row['case'].startswith('train') else row['case'].split('@')[0]


def _label(row: dict) -> str:
    b, _, h, w = row['shape']
    return f"{_kind(row)}, {h} x {w}, batch {b}"


def _name(arch: str, compiled: bool) -> str:
    return f"{arch}{' compiled' if compiled else ''}"


def time_ratio(num: dict, den: dict) -> Tuple[float, int]:
    """The time of row ``num`` over row ``den``: the median of the per-round ratios where
    both have as many interleaved rounds (drift hits both rows of a round alike), else the
    ratio of the medians; and the rounds it rests on."""
    a, b = num.get('round_seconds', []), den.get('round_seconds', [])
    if a and len(a) == len(b):
        return statistics.median(x / y for x, y in zip(a, b)), len(a)
    return num['seconds'] / den['seconds'], 1


def ratio_row(what: str, case: str, dtype: str, ratio: float, rounds: int,
              bound: Optional[float] = None, **fields) -> Dict[str, object]:
    """A ratio record (what :func:`~mmevt.analysis.benchmark_tables.ratio_table` renders)."""
    row = dict(what=what, case=case, dtype=dtype, ratio=ratio, rounds=rounds, **fields)
    if bound is not None:
        row.update(bound=bound, met=ratio <= bound)
    return row


def goal_rows(rows: Sequence[dict], goals: Sequence[Goal] = GOALS) -> List[dict]:
    """The ratio of each goal whose two rows the run measured, per case and dtype.

    Args:
        rows (Sequence[dict]): the run's benchmark rows (timed and saved-bytes rows).
        goals (Sequence[Goal]): the goals. Defaults to :data:`GOALS`.

    Returns:
        list[dict]: :func:`ratio_row` records with the goal's bound.
    """
    index = {}
    for r in rows:
        if 'arch' in r and _plain(r):
            # by the kind of case, not its name ('train' and 'train@HxW' are one case)
            index[(r['arch'], bool(r['compiled']), _kind(r), tuple(r['shape']),
                   r['dtype'], 'seconds' in r)] = r
    out = []
    for g in goals:
        for (arch, comp, case, shape, dtype, timed), num in index.items():
            if (arch, comp) != g.num or (g.hw and tuple(shape[2:]) != g.hw) or (
                    g.case and case != g.case) or timed != (g.metric == 'seconds'):
                continue
            den = index.get((g.den[0], g.den[1], case, shape, dtype, timed))
            if den is None:
                continue
            what = f'{_name(*g.num)} / {_name(*g.den)}'
            if timed:
                ratio, rounds = time_ratio(num, den)
                out.append(ratio_row(f'{what}, time', _label(num), dtype, ratio, rounds,
                                     g.bound))
                continue
            h, w = shape[2:]
            for batch, key, label in ((1, 'saved_mib_batch1', 'batch 1'),
                                      (2, 'saved_mib_per_image', 'per image, batch 2')):
                # the pair, size and batch as fields too: the memory section groups by them
                out.append(ratio_row(f'{what}, saved bytes', f'{h} x {w}, {label}', dtype,
                                     num[key] / den[key], 1, g.bound, num=g.num[0],
                                     den=g.den[0], hw=[h, w], batch=batch))
    return out


def pair_rows(rows: Sequence[dict], num: str, den: str) -> List[dict]:
    """``num``'s time over ``den``'s (model names as the rows give them) in every case,
    dtype and compile setting both were measured in (``--ratio``)."""
    by = {(r['arch'], r['case'], r['dtype'], bool(r['compiled'])): r for r in rows
          if 'seconds' in r}
    out = []
    for (arch, case, dtype, comp), a in by.items():
        b = by.get((den, case, dtype, comp))
        if arch != num or b is None:
            continue
        ratio, rounds = time_ratio(a, b)
        out.append(ratio_row(f'{_name(num, comp)} / {_name(den, comp)}, time', _label(a),
                             dtype, ratio, rounds))
    return out


__all__ = ['GOALS', 'Goal', 'goal_rows', 'pair_rows', 'ratio_row', 'time_ratio']
