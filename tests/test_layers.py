"""The package's layers hold: every import in ``mmevt/`` goes to its own layer or one above it,
in the order ``docs/extending.md`` ("Where things live") documents, and no toolkit's name is
branched on outside ``mmevt/toolkits/``. Static (``ast`` and text), nothing is imported."""
import ast
import os
import os.path as osp
import re
from typing import Dict, Iterator, List, Tuple

from helpers import REPO

PACKAGE = osp.join(REPO, 'mmevt')
ROOT = 'mmevt'  # ``import mmevt`` inside a function: the one import allowed from any layer


def documented_layers() -> List[List[str]]:
    """The paths of each row of extending.md's layer table, top row first (``mmevt/x/`` or
    ``mmevt/x.py``, as dotted module prefixes)."""
    text = open(osp.join(REPO, 'docs', 'extending.md')).read()
    section = text.split('## Where things live', 1)[1].split('\n## ', 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split('|')
        if len(cells) < 4 or not cells[2].strip().startswith('`mmevt'):
            continue
        paths = re.findall(r'`(mmevt/[^`]*)`', cells[2])
        rows.append([p.rstrip('/').replace('/__init__.py', '').replace('.py', '')
                     .replace('/', '.') for p in paths])
    return rows


def layer_of(module: str, layers: List[List[str]]) -> int:
    """The row of the longest documented prefix of ``module``; -1 where none is."""
    best, row = '', -1
    for i, prefixes in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + '.')) and len(prefix) > len(best):
                best, row = prefix, i
    return row


def package_modules() -> Iterator[Tuple[str, str]]:
    """``(module name, file)`` of every Python file of the package."""
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith('.py'):
                path = osp.join(folder, name)
                module = osp.relpath(path, REPO)[:-3].replace(os.sep, '.')
                yield module.replace('.__init__', ''), path


def imports_of(module: str, path: str) -> Iterator[Tuple[str, int, bool]]:
    """``(imported mmevt module, line, inside a function)`` of each import in ``path``."""
    tree = ast.parse(open(path).read())
    package = module if path.endswith('__init__.py') else module.rpartition('.')[0]
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef,
                                                               ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')[:len(package.split('.')) - node.level + 1]
                target = '.'.join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f'{target}.{a.name}' for a in node.names]
            else:
                names = [node.module] if node.module else []
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name == ROOT or name.startswith(ROOT + '.'):
                yield name, node.lineno, id(node) in nested


def test_the_documented_layers_cover_the_package():
    layers = documented_layers()
    assert len(layers) >= 10, layers  # the table was found and read
    unplaced = [m for m, _ in package_modules() if layer_of(m, layers) < 0]
    assert not unplaced, f'modules in no row of docs/extending.md\'s layer table: {unplaced}'


def test_every_import_goes_to_its_own_layer_or_above():
    layers = documented_layers()
    upward = []
    for module, path in package_modules():
        here = layer_of(module, layers)
        for target, line, in_function in imports_of(module, path):
            if target == ROOT and in_function:
                continue  # the package root, for its registration
            there = layer_of(target, layers)
            if there > here:
                upward.append(f'{osp.relpath(path, REPO)}:{line} imports {target} '
                              f'(row {there} of the table, below its own row {here})')
    assert not upward, '\n'.join(upward)


def test_the_check_sees_an_upward_import(tmp_path):
    # the walk above reads relative imports as the interpreter resolves them
    path = tmp_path / 'patches.py'
    path.write_text('from ..analysis import flops\nfrom . import atomic_writes\n'
                    'def f():\n    import mmevt\n')
    found = list(imports_of('mmevt.patches.x', str(path)))
    assert found == [('mmevt.analysis', 1, False), ('mmevt.patches.atomic_writes', 2, False),
                     ('mmevt', 4, True)]
    layers = documented_layers()
    assert layer_of('mmevt.analysis.flops', layers) > layer_of('mmevt.patches.x', layers)


def test_the_package_holds_no_docs_code():
    # what writes the docs' pages (their generated sections) is project code in tools/, not
    # the package's: no module of mmevt/ holds a section marker, nor imports tools/
    found = []
    for module, path in package_modules():
        text = open(path).read()
        if '<!--' in text or re.search(r'^\s*(from|import) (tools|records_to_docs)\b', text, re.M):
            found.append(osp.relpath(path, REPO))
    assert not found, found


# A branch on a toolkit's name: `toolkit == 'mmdet'`, `scope != 'mmseg'`, `codebase in
# ('mmdet', ...)`, `default_scope == ...`, `'mmpretrain' in done`; the toolkit's module answers instead.
TOOLKIT_BRANCH = re.compile(
    r"\b(toolkit|scope|default_scope|codebase)\b\s*(==|!=|\bin\b|\bnot in\b)\s*[\(\[{]?\s*"
    r"['\"]mm[a-z0-9]*['\"]|['\"]mm[a-z0-9]*['\"]\s+(in|not in)\s+\w")


def _branches(text: str) -> List[str]:
    return [line.strip() for line in text.splitlines() if TOOLKIT_BRANCH.search(line)]


def test_no_toolkit_branch_outside_the_toolkits_modules():
    found: Dict[str, List[str]] = {}
    for top in ('mmevt', 'tools'):
        for folder, _, files in os.walk(osp.join(REPO, top)):
            if osp.join('mmevt', 'toolkits') in folder:
                continue
            for name in files:
                if name.endswith('.py'):
                    path = osp.join(folder, name)
                    lines = _branches(open(path).read())
                    if lines:
                        found[osp.relpath(path, REPO)] = lines
    assert not found, found


def test_the_branch_check_sees_a_branch():
    lines = ["if toolkit == 'mmaction':", "if scope not in ('mmdet', 'x'):",
             "det = cfg.default_scope == 'mmdet'", "if plan.toolkit in ('mmseg', 'mmpretrain'):",
             "if self.codebase == 'mmdet':", "if 'mmpretrain' in done:"]
    assert _branches('\n'.join(lines + ["if kit.onnx_kind == 'segmentor':"])) == lines
