#!/usr/bin/env python
"""Print params and FLOPs (multiply-adds) of every EVT / EVT-Swin / RMT arch.

    python tools/analysis/complexity.py [--size 224 224] [--arch evt-t rmt-t ...]
    python tools/analysis/complexity.py --fvcore      # also fvcore's count (the authors')
    python tools/analysis/complexity.py --breakdown   # MACs by kind of layer
    python tools/analysis/complexity.py --settings    # the arch table (docs/method.md)
    python tools/analysis/complexity.py --write [--fvcore]  # rewrite those tables in the docs
    python tools/analysis/complexity.py --check       # exit 1 if the docs tables are stale

Counts the classifier (backbone + the authors' 1024-wide RMT head, 1000 classes, unless the
name ends in ``+linear``) and the backbone alone; attention matmuls are counted even where a
fused kernel runs them. FLOPs are printed in two units: G = 1e9 multiply-adds, and
Gi = 2**30 (the RMT authors' published figures are fvcore's count divided by 2**30: see
docs/model_zoo.md). The default archs are every arch of the arch table
(``mmevt.models.backbones.archs``) but the test ones; ``evt-swin-t+linear`` (etc.) count
EVT-Swin with Swin's linear head, as its ImageNet configs; ``rmt-t@2-2-10-2`` is RMT-T at
EVT-T's depth, for the paper's "RMT-T -> EVT-T" statement. The markdown tables printed are
the tables of docs/model_zoo.md and docs/method.md; ``--write`` rewrites them there in place,
each between its two markers (:func:`table_markers`), the fvcore table only with ``--fvcore``
(minutes), and ``--check`` compares them (``tests/test_docs_tables.py`` checks they are equal).
"""
import argparse
import json
import os.path as osp
import sys
from typing import Dict, List, Optional, Sequence, Tuple, Union

from mmevt.analysis import GIBI, GIGA, MEGA
from mmevt.models.backbones.archs import ARCH_ALIASES, ARCH_FAMILIES, ARCH_NAMES, resolve_arch

# records_to_docs.py beside this file writes the docs' tables: project code, not the package's
sys.path.append(osp.dirname(osp.abspath(__file__)))

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

LINEAR_HEAD = ARCH_FAMILIES['evt-swin']  # Swin's linear head in their ImageNet configs
DEPTH_MATCHED = ('rmt-t@2-2-10-2', )  # RMT-T at EVT-T's depth
ARCHS = [row for name in ARCH_NAMES if name not in ARCH_FAMILIES['test']
         for row in (name, ) + ((f'{name}+linear', ) if name in LINEAR_HEAD else ())]
ARCHS += DEPTH_MATCHED
# the archs the paper's efficiency statements compare (docs/model_zoo.md)
BREAKDOWN_ARCHS = [*ARCH_FAMILIES['rmt'], *ARCH_FAMILIES['evt'], *DEPTH_MATCHED]
AUTHORS_GFLOPS = {'rmt-t': 2.5, 'rmt-s': 4.5, 'rmt-b': 9.7, 'rmt-l': 18.2}  # theirs, at 224
# the docs' tables (at DOCS_SIZE, for ARCHS) and the doc each is written into
DOCS_SIZE = (224, 224)
DOC_TABLES = {'settings': 'docs/method.md', 'complexity': 'docs/model_zoo.md',
              'fvcore': 'docs/model_zoo.md', 'breakdown': 'docs/model_zoo.md'}


def resolve(name: str) -> Union[str, dict]:
    """An arch name, or ``rmt-t@D1-D2-D3-D4``: a zoo arch with other depths."""
    name = name.replace('+linear', '')
    if '@' not in name:
        return name
    arch, depths = name.split('@')
    return dict(resolve_arch(arch), depths=[int(d) for d in depths.split('-')])


def settings_table() -> List[str]:
    """The settings of every arch of the zoo (the arch table, resolved), one row each."""
    def per_stage(values) -> str:
        return '-'.join(f'{v:g}' for v in values)

    def mixers(values) -> str:
        runs = []  # consecutive equal stages as 'name x n'
        for v in values:
            name = v if isinstance(v, str) else v['type']
            if runs and runs[-1][0] == name:
                runs[-1][1] += 1
            else:
                runs.append([name, 1])
        return ', '.join(f'{n} x{c}' if c > 1 else n for n, c in runs)

    lines = ['| arch | aliases | widths | depths | heads | mixers | group size | decay | '
             'rotary | stem | layer scale | drop path |', '|---' * 12 + '|']
    for name in ARCH_NAMES:
        if name in ARCH_FAMILIES['test']:
            continue
        a = resolve_arch(name)
        aliases = ', '.join(k for k, v in ARCH_ALIASES.items() if v == name and k != name)
        groups = sorted(set(a['group_sizes']))
        lines.append(
            f"| {name} | {aliases or '-'} | {per_stage(a['embed_dims'])} | "
            f"{per_stage(a['depths'])} | {per_stage(a['num_heads'])} | {mixers(a['mixers'])} | "
            f"{per_stage(groups)} | {a['decay']} | {'yes' if a['use_rope'] else 'no'} | "
            f"{a['stem']} | {per_stage(a['layer_scales'])} | {a['drop_path_rate']} |")
    return lines


def complexity_rows(archs: Sequence[str], size: Tuple[int, int]) -> Dict[str, dict]:
    """Params and MACs of each arch's classifier and backbone, counted on the meta device
    (shapes only: counts do not depend on the weights).

    One counted forward per arch: the classifier's MACs by kind of layer
    (:func:`mmevt.analysis.macs_breakdown`); the backbone's are those less the head's (the
    output norms the backbone adds are not multiply-adds), as
    :func:`mmevt.analysis.model_complexity` counts them.

    Returns:
        dict: per arch ``params``, ``macs``, ``backbone_params``, ``backbone_macs`` and
        ``breakdown`` (MACs by kind of layer).
    """
    import torch

    from mmevt.analysis import count_params, macs_breakdown
    from mmevt.analysis.complexity import LinearHeadClassifier, RMTHeadClassifier
    from mmevt.models import EVT
    rows = {}
    with torch.device('meta'):
        for a in archs:
            clf = (LinearHeadClassifier if '+linear' in a else RMTHeadClassifier)(resolve(a))
            parts = macs_breakdown(clf, (1, 3) + tuple(size))
            rows[a] = dict(params=count_params(clf), macs=parts['total'],
                           backbone_params=count_params(EVT(resolve(a))),
                           backbone_macs=parts['total'] - parts['head'], breakdown=parts)
    return rows


def complexity_table(rows: Dict[str, dict]) -> List[str]:
    """The markdown table of docs/model_zoo.md."""
    lines = ['| arch | params (M) | FLOPs (G) | FLOPs (Gi) | backbone params (M) | '
             'backbone FLOPs (G) |', '|---' * 6 + '|']
    for arch, c in rows.items():
        lines.append(f"| {arch} | {c['params'] / MEGA:.2f} | {c['macs'] / GIGA:.2f} | "
                     f"{c['macs'] / GIBI:.2f} | {c['backbone_params'] / MEGA:.2f} | "
                     f"{c['backbone_macs'] / GIGA:.2f} |")
    return lines


def fvcore_table(flops: Dict[str, float]) -> List[str]:
    """The fvcore table of docs/model_zoo.md."""
    return (['| arch | fvcore FLOPs (G) | fvcore FLOPs (Gi) |', '|---' * 3 + '|']
            + [f'| {a} | {f / GIGA:.3f} | {f / GIBI:.2f} |' for a, f in flops.items()])


def breakdown_table(rows: Dict[str, dict]) -> List[str]:
    """MACs by kind of layer of each row's classifier (:func:`complexity_rows`), G = 1e9."""
    parts = {a: r['breakdown'] for a, r in rows.items()}
    kinds = [k for k in next(iter(parts.values())) if k != 'total']
    lines = ['| arch | ' + ' | '.join(kinds) + ' | total |', '|---' * (len(kinds) + 2) + '|']
    for a, r in parts.items():
        lines.append(f'| {a} | ' + ' | '.join(f'{r[k] / GIGA:.3f}' for k in kinds) +
                     f" | {r['total'] / GIGA:.3f} |")
    return lines


def docs_tables(rows: Dict[str, dict],
                fvcore: Optional[Dict[str, float]] = None) -> Dict[str, List[str]]:
    """The tables of the docs, by name (:data:`DOC_TABLES`).

    Args:
        rows (dict): :func:`complexity_rows` of :data:`ARCHS` at :data:`DOCS_SIZE`.
        fvcore (dict, optional): :func:`fvcore_flops` per arch of :data:`ARCHS`. Defaults to
            None (no fvcore table: the docs keep theirs).

    Returns:
        dict: table name -> its markdown lines.
    """
    tables = dict(settings=settings_table(), complexity=complexity_table(rows),
                  breakdown=breakdown_table({a: rows[a] for a in BREAKDOWN_ARCHS}))
    if fvcore is not None:
        tables['fvcore'] = fvcore_table(fvcore)
    return tables


def table_markers(name: str) -> Tuple[str, str]:
    """The two lines (markdown comments) a doc holds table ``name`` between."""
    return (f'<!-- {name} table: written by tools/analysis/complexity.py --write -->',
            f'<!-- end of {name} table -->')


def splice_tables(text: str, tables: Dict[str, List[str]], doc: str = 'the text') -> str:
    """``text`` with each table of ``tables`` put between its markers (what was there goes;
    :func:`docs_tables.splice`, ``tools/analysis/docs_tables.py``).

    Raises:
        ValueError: ``text`` lacks a table's markers, holds them twice or in the wrong order.
    """
    from records_to_docs import splice
    for name, lines in tables.items():
        text = splice(text, lines, table_markers(name), f'{doc} (the {name} table)')
    return text


def write_docs(tables: Dict[str, List[str]], repo: str = REPO, check: bool = False) -> List[str]:
    """Put ``tables`` (:func:`docs_tables`) into their docs, in place.

    Args:
        tables (dict): table name -> markdown lines.
        repo (str): the source checkout. Defaults to this tool's.
        check (bool): only compare, write nothing. Defaults to False.

    Returns:
        list[str]: the docs (paths relative to ``repo``) that changed (with ``check``: that
        differ).
    """
    from records_to_docs import rewrite_page
    return [doc for doc in dict.fromkeys(DOC_TABLES[name] for name in tables)
            if rewrite_page(osp.join(repo, doc), lambda text, doc=doc: splice_tables(
                text, {n: t for n, t in tables.items() if DOC_TABLES[n] == doc}, doc), check)]


def fvcore_flops(arch, size) -> float:
    """fvcore's ``FlopCountAnalysis`` total of the classifier (attention on the reference
    path so its matmuls are visible to the tracer); fvcore also counts norms."""
    import logging
    import warnings

    import torch
    warnings.filterwarnings('ignore', message='.*torch.jit.script.*')  # fvcore traces with jit
    from fvcore.nn import FlopCountAnalysis

    from mmevt.analysis.complexity import (LinearHeadClassifier, RMTHeadClassifier,
                                           reference_attention)
    logging.getLogger('fvcore').setLevel(logging.ERROR)
    model = (LinearHeadClassifier if '+linear' in arch
             else RMTHeadClassifier)(resolve(arch)).eval()
    with torch.no_grad(), reference_attention(model):
        counter = FlopCountAnalysis(model, torch.zeros((1, 3) + tuple(size)))
        counter.unsupported_ops_warnings(False)
        counter.uncalled_modules_warnings(False)
        return float(counter.total())


def update_docs(check: bool = False, with_fvcore: bool = False) -> None:
    """``--write`` / ``--check``: count :data:`ARCHS` at :data:`DOCS_SIZE`, then rewrite the
    docs tables (:func:`write_docs`) or exit 1 naming the docs that differ."""
    rows = complexity_rows(ARCHS, DOCS_SIZE)
    flops = {a: fvcore_flops(a, DOCS_SIZE) for a in ARCHS} if with_fvcore else None
    changed = write_docs(docs_tables(rows, flops), check=check)
    if check and changed:
        sys.exit(f"stale tables in {', '.join(changed)}: run tools/analysis/complexity.py "
                 f"--write{' --fvcore' if with_fvcore else ''}")
    print(f"wrote {', '.join(changed)}" if changed and not check
          else 'the docs tables are up to date')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--size', type=int, nargs=2, default=[224, 224], metavar=('H', 'W'))
    parser.add_argument('--arch', nargs='+', default=None)
    parser.add_argument('--breakdown', action='store_true',
                        help='MACs by kind of layer (default archs: RMT, EVT and RMT-T at '
                             "EVT-T's depth)")
    parser.add_argument('--settings', action='store_true',
                        help='print the settings of every arch (docs/method.md) and stop')
    parser.add_argument('--fvcore', action='store_true',
                        help="also count the classifiers with fvcore, as the authors did "
                             "(needs `pip install fvcore`)")
    parser.add_argument('--json', help='also write the numbers to this JSON file')
    docs = parser.add_mutually_exclusive_group()
    docs.add_argument('--write', action='store_true',
                      help='rewrite the tables of docs/model_zoo.md and docs/method.md in '
                           'place (the fvcore table too with --fvcore) and stop')
    docs.add_argument('--check', action='store_true',
                      help='exit 1 if those tables differ from what --write writes; write '
                           'nothing')
    args = parser.parse_args()
    if (args.write or args.check) and (args.arch or args.size != list(DOCS_SIZE) or args.json
                                       or args.settings or args.breakdown):
        parser.error('--write / --check count the docs\' archs at 224 x 224: drop --arch, '
                     '--size, --json, --settings and --breakdown')
    if args.settings:
        print('\n'.join(settings_table()))
        return
    if args.breakdown:
        print(f'GMACs (1e9) of the classifier by kind of layer @ {args.size[0]}x{args.size[1]}')
        print('\n'.join(breakdown_table(complexity_rows(args.arch or BREAKDOWN_ARCHS,
                                                         args.size))))
        return
    if args.fvcore:
        try:
            import fvcore  # noqa: F401
        except ImportError:
            parser.error('--fvcore needs fvcore: pip install fvcore')
    if args.write or args.check:
        update_docs(args.check, args.fvcore)
        return
    archs = args.arch or ARCHS
    print(f'@ {args.size[0]}x{args.size[1]}')
    rows = complexity_rows(archs, args.size)
    print('\n'.join(complexity_table(rows)), flush=True)
    if args.fvcore:
        flops = {a: fvcore_flops(a, args.size) for a in archs}
        print('\n' + '\n'.join(fvcore_table(flops)))
        for a, f in flops.items():
            rows[a]['fvcore'] = f
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
