"""Sphinx configuration of mmevt's documentation (Markdown pages through myst-parser, as the
OpenMMLab projects do). Build: ``make docs`` (warnings are errors); the site lands in
``docs/_build/html``. ``tests/test_docs_site.py`` builds it too."""
import contextlib
import glob
import importlib
import inspect
import io
import os.path as osp
import runpy
import sys
from typing import Dict, List

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

DOCS = osp.dirname(osp.abspath(__file__))
REPO = osp.dirname(DOCS)
sys.path.insert(0, REPO)  # autodoc imports the checkout's mmevt

project = 'mmevt'
copyright = 'mmevt contributors, Apache License 2.0'
author = 'mmevt contributors'


def _version() -> str:
    with open(osp.join(REPO, 'mmevt', '__init__.py')) as f:
        for line in f:
            if line.startswith('__version__'):
                return line.split('=')[1].strip().strip("'\"")
    raise RuntimeError('mmevt/__init__.py has no __version__')


release = version = _version()

extensions = ['myst_parser', 'sphinx.ext.autodoc', 'sphinx.ext.napoleon',
              'sphinx.ext.viewcode']
source_suffix = {'.md': 'markdown'}
root_doc = 'index'
# the family READMEs under configs/ are linked from the zoo page, not pages of the site
exclude_patterns = ['_build']
# `#anchor` links to headings, as GitHub renders them (tests/test_docs_site.py checks them)
myst_heading_anchors = 4
myst_enable_extensions = ['colon_fence']
# links from a page to repository files outside docs/ (configs, tools, LICENSE ...) are
# plain links on GitHub; in the site they point at the repository, not at a page
myst_url_schemes = ['http', 'https', 'mailto']

html_theme = 'furo'
html_title = f'mmevt {release}'

autodoc_member_order = 'bysource'
autodoc_typehints = 'description'
autodoc_default_options = {'members': False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# The public API: each package's ``__all__`` (a module without one: its public names defined
# in it), each name documented once, under the first package listing it.
API_PACKAGES = [
    'mmevt', 'mmevt.models', 'mmevt.models.backbones', 'mmevt.models.layers', 'mmevt.ops',
    'mmevt.analysis', 'mmevt.converters', 'mmevt.engine', 'mmevt.evaluation',
    'mmevt.datasets', 'mmevt.toolkits', 'mmevt.stack', 'mmevt.patches', 'mmevt.apis',
    'mmevt.swap', 'mmevt.deploy',
]


def public_names(module) -> List[str]:
    """The names ``module`` makes public: its ``__all__``, else what it defines without a
    leading underscore."""
    names = getattr(module, '__all__', None)
    if names is not None:
        return [n for n in names if n != '__version__']
    return [n for n, obj in vars(module).items()
            if not n.startswith('_') and not inspect.ismodule(obj)
            and getattr(obj, '__module__', module.__name__) == module.__name__
            and (inspect.isclass(obj) or inspect.isfunction(obj))]


def api_entries() -> Dict[str, List[tuple]]:
    """``{package: [(directive, dotted name), ...]}``: every public name once, with the
    package that lists it first in :data:`API_PACKAGES`."""
    seen, out = set(), {}
    for pkg in API_PACKAGES:
        module = importlib.import_module(pkg)
        rows = []
        for name in public_names(module):
            obj = getattr(module, name)
            key = id(obj) if (inspect.isclass(obj) or inspect.isfunction(obj)) else (pkg, name)
            if key in seen:
                continue
            seen.add(key)
            # a constant is named, not autodoc'ed: autodoc would show its type's docstring
            # (dict's, tuple's) where the constant has none of its own
            kind = ('autoclass' if inspect.isclass(obj) else
                    'autofunction' if callable(obj) else 'py:data')
            rows.append((kind, f'{pkg}.{name}'))
        out[pkg] = rows
    return out


class PublicAPI(SphinxDirective):
    """``mmevt-api``: the autodoc entries of :func:`api_entries`, a section per package."""

    def run(self):
        lines = []
        for pkg, rows in api_entries().items():
            if not rows:
                continue
            lines += [pkg, '-' * len(pkg), '', f'.. automodule:: {pkg}', '   :no-members:',
                      '   :no-index:', '']
            for kind, name in rows:
                lines += [f'.. {kind}:: {name}', '']
        node = nodes.section()
        node.document = self.state.document
        self.state.nested_parse(StringList(lines, source='mmevt-api'), 0, node,
                                match_titles=True)
        return node.children


# tools/ files that are not a user's command: the mmaction2 wheel builder (run by
# tools/bootstrap.sh, with its own usage) and the goals tools/analysis/benchmark.py imports
NOT_COMMANDS = {'tools/build_mmaction2_wheel.py', 'tools/analysis/benchmark_goals.py'}


def commands() -> List[str]:
    """The command-line tools (``tools/**/*.py`` relative to the repository, the folder's
    own scripts first), each an argparse program."""
    found = sorted(glob.glob(osp.join(REPO, 'tools', '*.py')) +
                   glob.glob(osp.join(REPO, 'tools', '*', '*.py')),
                   key=lambda p: (p.count(osp.sep), p))
    return [osp.relpath(p, REPO) for p in found if osp.relpath(p, REPO) not in NOT_COMMANDS]


def command_help(path: str) -> str:
    """What ``python PATH --help`` prints: the tool run in this process (one torch import
    for all), its argument parser's own help."""
    argv, out = sys.argv, io.StringIO()
    sys.argv = [osp.basename(path), '--help']
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(osp.join(REPO, path), run_name='__main__')
    except SystemExit as e:
        if e.code not in (0, None):
            raise RuntimeError(f'{path} --help exited with {e.code}: {out.getvalue()}')
    finally:
        sys.argv = argv
    if 'usage:' not in out.getvalue():
        raise RuntimeError(f'{path} --help printed no usage: {out.getvalue()[:500]!r}')
    return out.getvalue()


class CommandLineTools(SphinxDirective):
    """``mmevt-tools``: a section per tool of :func:`commands` with its ``--help``."""

    def run(self):
        lines = []
        for path in commands():
            lines += [path, '-' * len(path), '', '.. code-block:: text', '']
            lines += ['   ' + line for line in command_help(path).rstrip().splitlines()]
            lines.append('')
        node = nodes.section()
        node.document = self.state.document
        self.state.nested_parse(StringList(lines, source='mmevt-tools'), 0, node,
                                match_titles=True)
        return node.children


def setup(app):
    app.add_directive('mmevt-api', PublicAPI)
    app.add_directive('mmevt-tools', CommandLineTools)
    return {'parallel_read_safe': True}

