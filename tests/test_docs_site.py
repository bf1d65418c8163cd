"""The documentation as a reader meets it: every Markdown link, anchor and repository path in
backticks resolves, every page is in a toctree, the Sphinx site builds with warnings as
errors, no page states a measurement by hand, and the licence / citation files agree with
the package. No network: links to other sites are not followed."""
import glob
import importlib
import os
import os.path as osp
import re
from typing import Dict, List, Set

import pytest

from helpers import REPO, load_tool

DOCS = osp.join(REPO, 'docs')
FENCE = re.compile(r'^(```|~~~).*?^\1\s*$', re.M | re.S)
LINK = re.compile(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
CODE_SPAN = re.compile(r'(`+)(.+?)\1', re.S)
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$', re.M)
# what a backticked repository path starts with; the rest of a path may be a file or folder
REPO_ROOTS = ('configs/', 'tools/', 'mmevt/', 'docs/', 'tests/', 'requirements/', '.ci/')
REPO_FILES = {'Makefile', 'setup.py', 'pyproject.toml', 'model-index.yml', 'LICENSE',
              'CITATION.cff', 'MANIFEST.in', 'README.md', 'requirements.txt'}
# paths the docs name that are made, not kept: the wheel's package data, the site
MADE = ('mmevt/.mim', 'docs/_build')
# a path of another project or of the past: "mmdet's `configs/swin/`", "its own `...`",
# "the former `...`"
FOREIGN = re.compile(r"(?:\b(?:mm(?!evt\b)[\w-]*|onedl-[\w-]+|mim)'s(?:\s+own)?|\bits\s+own|"
                     r"\btheir(?:\s+own)?|\bformer)\s*\(?$")


def pages() -> List[str]:
    """The Markdown a reader meets: the README, the docs pages, the zoo's family pages."""
    return sorted([osp.join(REPO, 'README.md')] + glob.glob(osp.join(DOCS, '*.md')) +
                  glob.glob(osp.join(REPO, 'configs', '*', '*', 'README.md')))


def prose(text: str) -> str:
    """``text`` without its fenced code blocks and HTML comments."""
    return re.sub(r'<!--.*?-->', '', FENCE.sub('', text), flags=re.S)


def slug(title: str) -> str:
    """A heading's anchor as GitHub (and myst-parser's ``myst_heading_anchors``) make it."""
    title = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', title)  # a link: its text
    return re.sub(r'[^\w\- ]', '', title.strip().lower().replace('`', '')).replace(' ', '-')


def anchors(path: str, memo: Dict[str, Set[str]] = {}) -> Set[str]:
    if path not in memo:
        memo[path] = {slug(m[2]) for m in HEADING.finditer(FENCE.sub('', open(path).read()))}
    return memo[path]


def rel(path: str) -> str:
    return osp.relpath(path, REPO)


@pytest.mark.parametrize('page', pages(), ids=rel)
def test_every_link_and_anchor_resolves(page):
    text = prose(open(page).read())
    text = CODE_SPAN.sub(' ', text)  # `[a](b)` in code is no link
    bad = []
    for target in LINK.findall(text):
        if re.match(r'[a-z]+:', target):  # https:, mailto: ... (not followed: no network)
            continue
        path, _, anchor = target.partition('#')
        dest = osp.normpath(osp.join(osp.dirname(page), path)) if path else page
        if not osp.exists(dest):
            bad.append(f'{target}: no such file')
        elif not dest.startswith(REPO + osp.sep):
            bad.append(f'{target}: outside the repository')
        elif anchor and (not dest.endswith('.md') or anchor not in anchors(dest)):
            bad.append(f'{target}: no heading with the anchor #{anchor}')
    assert not bad, f'{rel(page)}: ' + '; '.join(bad)


def backticked_paths(text: str) -> List[str]:
    """The repository paths a page names in inline code (placeholders and globs left out:
    ``configs/det/**/*rmt-*``, ``configs/<task>/...``)."""
    out = []
    text = prose(text)
    for m in CODE_SPAN.finditer(text):
        if FOREIGN.search(text[max(0, m.start() - 40):m.start()]):
            continue
        code = m.group(2).strip().split('::')[0]  # a pytest node id names its file
        if re.search(r'[\s<>*{}$|\[\]]|\.\.\.', code) or code.startswith(MADE):
            continue
        if code.startswith(REPO_ROOTS) or code in REPO_FILES:
            out.append(code.rstrip('/'))
    return out


@pytest.mark.parametrize('page', pages(), ids=rel)
def test_every_backticked_repository_path_exists(page):
    missing = [p for p in backticked_paths(open(page).read())
               if not osp.exists(osp.join(REPO, p))]
    assert not missing, f'{rel(page)} names paths that do not exist: {missing}'


def test_the_path_and_link_checks_catch_what_they_should(tmp_path):
    # the checks above fail on a broken page (the functions they use, on known input)
    text = ('See `tools/no_such_tool.py`, `configs/<task>/x.py`, `mmevt/.mim/configs` and '
            "`tests/test_cls.py::test_x`, not mmdet's `configs/swin/` nor mmrotate's own "
            '`tools/x.py`.\n\n```bash\n`tools/in_code.py`\n```\n')
    assert backticked_paths(text) == ['tools/no_such_tool.py', 'tests/test_cls.py']
    assert slug("A toolkit's own `tools/train.py` cannot read a `pkg::` base") == \
        'a-toolkits-own-toolstrainpy-cannot-read-a-pkg-base'
    assert slug('Checkpoints and `weights_only`') == 'checkpoints-and-weights_only'
    assert LINK.findall('[a](b.md#c) and ![img](images/x.png) [x](https://e.org)') == \
        ['b.md#c', 'images/x.png', 'https://e.org']


def toctree_entries() -> Set[str]:
    entries = set()
    for page in glob.glob(osp.join(DOCS, '*.md')):
        for block in re.findall(r'^```\{toctree\}\n(.*?)^```', open(page).read(), re.M | re.S):
            entries |= {ln.strip() for ln in block.splitlines()
                        if ln.strip() and not ln.startswith(':')}
    return entries


def test_every_page_is_in_a_toctree():
    pages_ = {osp.splitext(osp.basename(p))[0] for p in glob.glob(osp.join(DOCS, '*.md'))}
    entries = toctree_entries()
    assert not (pages_ - {'index'} - entries), \
        f'docs pages in no toctree of docs/index.md: {sorted(pages_ - {"index"} - entries)}'
    assert not (entries - pages_), f'toctree entries without a page: {sorted(entries - pages_)}'


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    """The site, built in-process as `make docs` builds it (warnings are errors)."""
    from sphinx.cmd.build import build_main
    out = tmp_path_factory.mktemp('site')
    rc = build_main(['-b', 'html', '-W', '--keep-going', '-q', '-d', str(out / 'doctrees'),
                     DOCS, str(out / 'html')])
    assert rc == 0, 'sphinx reported warnings or errors (run `make docs` to see them)'
    return out / 'html'


def test_the_site_builds_with_every_page_and_the_api(site):
    for page in glob.glob(osp.join(DOCS, '*.md')):
        name = osp.splitext(osp.basename(page))[0]
        assert (site / f'{name}.html').is_file(), name
    api = (site / 'api.html').read_text()
    # autodoc found the public names, each once
    for name in ('mmevt.EVT', 'mmevt.converters.convert_checkpoint',
                 'mmevt.engine.PreemptionCheckpointHook', 'mmevt.analysis.count_flops'):
        assert api.count(f'id="{name}"') == 1, name
    assert 'id="mmevt.models.EVT"' not in api  # re-exported: documented once, under mmevt
    # the tools' reference: every command's --help, from its parser
    conf = load_tool('docs/conf.py')
    tools = (site / 'tools.html').read_text()
    assert 'tools/analysis/records_to_docs.py' in conf.commands()
    for path in conf.commands():  # a section each, its heading's id made from the path
        assert f'id="{re.sub(r"[/._]", "-", path)}"' in tools, path
    assert tools.count('usage:') == len(conf.commands())
    assert '--jsonl' in tools and 'id="tools-build-mmaction2-wheel-py"' not in tools
    # a GitHub-style anchor became a link to the heading's id
    faq = (site / 'faq.html').read_text()
    assert 'troubleshooting.html#a-toolkit-s-own-tools-train-py-cannot-read-a-config-with-a-pkg-base' in faq


def test_the_api_page_lists_each_public_name_once():
    conf = load_tool('docs/conf.py')
    entries = [name for rows in conf.api_entries().values() for _, name in rows]
    assert len(entries) == len(set(entries))
    objects = {}
    for name in entries:
        module, _, attr = name.rpartition('.')
        obj = getattr(importlib.import_module(module), attr)
        if callable(obj):
            assert id(obj) not in objects, (name, objects.get(id(obj)))
            objects[id(obj)] = name
    import mmevt
    assert {'mmevt.EVT', 'mmevt.RMTClsNeck', 'mmevt.register_all_modules'} <= set(entries)
    assert all(f'mmevt.{n}' in entries or n == '__version__' for n in mmevt.__all__)


# Measurements and facts of configuration, the rule the pages keep (see the test's docstring)
MEASUREMENT = re.compile(
    r'(?<![A-Za-z]-)\b\d+(?:[.,]\d+)?\s*'
    r'(?:ms|s|sec|seconds?|min|minutes?|h|hours?|days?|[KMGT]i?B|%|[GM]FLOPs?|[GM]MACs?|'
    r'img/s|it/s|tests?|passed|failed)(?!\w)'
    r'|\b\d+(?:\.\d+)?x (?:faster|slower|more|less|fewer)\b|\b\d+\.\d+x\b'
    r'|(?<![A-Za-z])(?:mAP|mIoU|AP|AR|mAcc|aAcc|top-1|top1|accuracy)(?:\s*@?\.?\d+)?\s*'
    r'(?:of|=|:|is)?\s*\d+\.\d+'
    r'|\bloss(?:es)?\b(?!\s+(?:weights?|scales?)\b)(?:\s+\w+){0,3}?\s+(?:from\s+)?\d+\.\d+',
    re.I)
# the words that make a number with a unit a setting: "default 120 s", "a timeout of 30 s"
SETTING = re.compile(r'\b(?:default|timeout|time limit|limits?|minimum|maximum|at most|up to|'
                     r'every|budget|fsync|retry|retries|waits?|at least|set to)\b[^.;:()]{0,12}$'
                     r'|[<>]=\s*[\w-]*\s*$', re.I)
# where a number is labelled as the paper's or its authors'
THEIRS = re.compile(r"\b(?:the paper|paper's|papers'|the authors|authors')", re.I)
# a measured difference (parity): a number with a decimal mantissa and an exponent, "7.3e-07"
# (a setting is written plainly: "atol 1e-4")
DIFFERENCE = re.compile(r'\b\d\.\d+e[-+]?\d+\b', re.I)
# a table column of measurements: its header names a unit of time, size, speed or share, a
# ratio (" / "), a metric or a difference; a row naming a metric makes its numbers metrics
MEASURED_COLUMN = re.compile(
    r'\b(?:ms|s|min|seconds?|minutes?|[KMGT]i?B|img/s|images/s|it/s|GFLOP/s|latency|'
    r'throughput|memory|speed-?up|difference|time|fps)\b|%| / |'
    r'(?<![A-Za-z])(?:mAP|mIoU|mAcc|aAcc|AP|AR|top-?[15]|acc(?:uracy)?|loss)\b', re.I)
METRIC_ROW = re.compile(r'(?<![A-Za-z])(?:mAP|mIoU|mAcc|aAcc|AP|AR|top-?[15]|acc(?:uracy)?|'
                        r'loss)\b', re.I)
NUMBER_CELL = re.compile(r'^[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?\s*(?:x|%)?'
                         r'(?:\s*/\s*[-+]?\d[\d,]*(?:\.\d+)?)*$')
TABLE = re.compile(r'^\|(.*)\|[ \t]*\n\|[-:| \t]+\|[ \t]*\n((?:\|.*\|[ \t]*(?:\n|$))*)', re.M)
# a table a checked generator wrote: the records' sections (tests/test_docs_tables.py checks
# them up to date, as it checks the complexity tables)
GENERATED = re.compile(r'<!-- (\S[^:>]*): written by (?:tools/analysis/records_to_docs\.py|'
                       r'tools/analysis/complexity\.py --write) -->.*?<!-- end of \1 -->', re.S)
SENTENCE = re.compile(r'(?<=[.;!?])\s+(?=[A-Z(*`"])|\n(?=\s*(?:[-*|]|\d+\.)\s)|\n\s*\n')


# the opening line of a fenced block of printed output (no language, text, console, log)
OUTPUT = re.compile(r'^(?:```|~~~)(?:text|console|log|output)?[ \t]*\n')


def measurements(text: str) -> List[str]:
    """The measurements ``text`` states by hand, by the rule of
    :func:`test_no_page_states_a_measurement_by_hand`."""
    if re.search(r'^<!-- Written by .*do not edit', text, re.M):
        return []  # a page a tool writes whole
    text = GENERATED.sub(' ', text)
    # printed output quoted in the page (its fence lines dropped)
    quoted = [m[0].split('\n', 1)[1].rsplit('\n', 1)[0] for m in FENCE.finditer(text)
              if OUTPUT.match(m[0])]
    text = CODE_SPAN.sub(' ', prose(text)) + '\n\n' + '\n\n'.join(quoted)
    text = LINK.sub(' ', text)  # link targets (arXiv ids) are no measurements
    found = table_measurements(text)
    for sentence in SENTENCE.split(text):
        if THEIRS.search(sentence):
            continue
        found += [m.group(0) for m in MEASUREMENT.finditer(sentence)
                  if not SETTING.search(sentence[:m.start()])]
        found += DIFFERENCE.findall(sentence)
    return found


def table_measurements(text: str) -> List[str]:
    """The numbers of ``text``'s tables that are measurements: a bare number in a column
    whose header names a unit, a ratio or a metric (not labelled as the paper's), or in a
    row that names a metric; each as ``'header: cell'``."""
    found = []
    for table in TABLE.finditer(text):
        head = [c.strip() for c in table[1].split('|')]
        for line in table[2].splitlines():
            cells = [c.strip() for c in line.strip()[1:-1].split('|')]
            metric_row = any(METRIC_ROW.search(c) for c in cells if not NUMBER_CELL.match(c))
            for name, cell in zip(head, cells):
                if (NUMBER_CELL.match(cell) and not THEIRS.search(name)
                        and (MEASURED_COLUMN.search(name) or metric_row)):
                    found.append(f'{name}: {cell}')
    return found


@pytest.mark.parametrize('page', pages(), ids=rel)
def test_no_page_states_a_measurement_by_hand(page):
    """What this project measured (test counts, timings, CI cost, latencies, sizes, metrics)
    appears only in tables a named command writes from records in the repository, between
    ``<!-- NAME: written by COMMAND -->`` and ``<!-- end of NAME -->`` (a test checks each
    table is the command's output), or on a page that tool writes whole; prose points to
    those tables. A measurement is a number with a unit of time, size, share or speed, a
    ratio ("1.23x", "2x faster"; a "1x" schedule is a setting), a count of tests, or a
    metric followed by its value.

    Not measurements, so allowed: facts of configuration, written without a unit (an input
    size 224, batch 8, 300 iterations, a version 2.1.0) or as the code that sets them, in
    backticks (``--time=00:05:00``), or after a word that names a setting (default,
    timeout, limit, budget, every, up to, at most / at least, minimum / maximum, waits, retry,
    set to: "default
    120 s"); numbers in commands (code spans, ``bash`` / ``python`` blocks); and the paper's
    or its authors' numbers, labelled as theirs in the same sentence ("the paper gives 18.2
    GFLOPs"). A block of printed output (no language, ``text``, ``console``) is held to the
    rule: a measured value in it is elided (``...``) or the block is a generated table.
    Tables count too: a bare number under a header naming a unit, a ratio or a metric, or
    in a row naming a metric; and a measured difference (``7.3e-07``) anywhere."""
    found = measurements(open(page).read())
    assert not found, (f'{rel(page)} states measurements by hand (point to a generated '
                       f'table instead, or label a paper number as the paper\'s): {found}')


def test_the_measurement_rule_finds_what_it_must():
    assert measurements('the suite took 21 min 24 s; bbox mAP 0.854 and 6 GB') == \
        ['21 min', '24 s', 'mAP 0.854', '6 GB']
    assert measurements('CI took 35 min. EVT-T ran in 62.1 ms, 1.3x faster. 759 tests '
                        'passed; the demo scored mAP 0.895 and `acc/top1: 0.25`.') == \
        ['35 min', '62.1 ms', '1.3x faster', '759 tests', 'mAP 0.895']
    assert measurements('the loss falls from 0.0159 to 0.0025; AP .5 1.000, AR 0.975') == \
        ['loss falls from 0.0159', 'AP .5 1.000', 'AR 0.975']
    assert measurements('it printed coco/bbox_mAP: 0.854; a loss weight of 0.5') == \
        ['mAP: 0.854']
    assert measurements('| model | metric | value | time vs off |\n|---|---|---|---|\n'
                        '| EVT | Top-1 | 81.2 | 1.22 |\n') == ['value: 81.2', 'time vs off: 1.22']
    assert measurements('OCRNet (HRNet-18s), ResNet-50') == []
    assert measurements('it saves 30% for 22 % more time') == ['30%', '22 %']
    assert measurements('a 3x schedule at 1333 x 800, 1.23x the memory') == ['1.23x']
    assert measurements('Python 3.11, mmcv 2.1.0, `tools/x.py 8`, [arXiv 2604.18549](u), '
                        'input 224, batch 8, 300 iterations, `--time=5`.') == []
    # settings, the paper's numbers and generated tables are allowed; a measurement beside
    # a setting is not
    assert measurements('Slurm waits (default 120 s) before a requeue. The paper gives '
                        'about 18.2 GFLOPs. A timeout of 30 s; it took 40 s.') == ['40 s']
    assert measurements('<!-- t section: written by tools/analysis/records_to_docs.py -->\n'
                        '| a | 3 ms |\n<!-- end of t section -->\nMeasured: 4 ms.') == ['4 ms']
    # a table of another "generator" is no exception
    assert measurements('<!-- t: written by hand -->\n| a | 3 ms |\n<!-- end of t -->') == \
        ['3 ms']
    # a table's numbers under a unit, a ratio or a metric, or in a row naming a metric; a
    # measured difference anywhere; settings (an input size, a batch, "1e-4") are not
    assert measurements('| model | input | onnxruntime (ms) | eager / ort | img/GPU |\n'
                        '|---|---|---|---|---|\n| EVT-T | 224 x 224 | 79.7 | 1.38 | 2 |\n\n'
                        '| model | metric | value |\n|:-|:-|-:|\n| EVT | bbox mAP | 0.854 |\n'
                        '| EVT | batch | 16 |\n\nAgreed to 7.3e-07 (atol 1e-4).') == \
        ['onnxruntime (ms): 79.7', 'eager / ort: 1.38', 'value: 0.854', '7.3e-07']
    assert measurements('| model | top-1 (the paper) |\n|---|---|\n| EVT-S | 84.1 |\n') == []
    # printed output is held to the rule; commands are not
    assert measurements('```text\nstep took 3.2 s\n```\n```bash\nx --timeout 30 s\n```') == \
        ['3.2 s']


def test_the_readme_is_a_front_page():
    text = open(osp.join(REPO, 'README.md')).read()
    assert len(prose(text).split()) <= 1500
    for section in ('## Support', '## Quick start', '## EVT in your own config', '## Tools',
                    '## Known limits', '## Documentation', '## News'):
        assert section in text, section


# `pip install` options that take a value (the value is no package)
PIP_VALUE_OPTIONS = {'-r', '--requirement', '-c', '--constraint', '-t', '--target', '-f',
                     '--find-links', '-i', '--index-url', '--extra-index-url', '--prefix',
                     '--root', '-e', '--editable'}


def pip_installs(text: str) -> List[List[str]]:
    """The argument lists of every ``pip install`` a page writes, in code or prose (quotes
    dropped, a shell line continuation joined)."""
    text = text.replace('\\\n', ' ')
    return [[a.strip('"\'') for a in m[1].split('#')[0].split()]
            for m in re.finditer(r'\bpip install\b([^`\n;|&]*)', text)]


def bad_pip_installs(text: str) -> List[str]:
    """The ``pip install`` lines of ``text`` that would install from somewhere the page
    cannot mean: mmevt by name (it is on no package index: a path or a wheel file is how it
    installs) or a requirements file the repository lacks."""
    bad = []
    for args in pip_installs(text):
        after_option = None
        for arg in args:
            if after_option in ('-r', '--requirement', '-c', '--constraint') and \
                    arg.startswith('requirements/') and not osp.isfile(osp.join(REPO, arg)):
                bad.append(f'pip install {" ".join(args)}: no file {arg}')
            if after_option is None and not arg.startswith('-') and \
                    re.fullmatch(r'mmevt(\[[\w,]+\])?([<>=!~].*)?', arg):
                bad.append(f'pip install {" ".join(args)}: mmevt is on no package index')
            after_option = arg if arg in PIP_VALUE_OPTIONS else None
    return bad


@pytest.mark.parametrize('page', pages(), ids=rel)
def test_every_pip_install_installs_from_where_the_page_says(page):
    bad = bad_pip_installs(open(page).read())
    assert not bad, f'{rel(page)}: {bad}'


def test_the_pip_install_check_catches_what_it_should():
    assert bad_pip_installs('`pip install "mmevt[timm]"` and\n```bash\npip install mmevt\n```') \
        == ['pip install mmevt[timm]: mmevt is on no package index',
            'pip install mmevt: mmevt is on no package index']
    assert bad_pip_installs('pip install -r requirements/no_such.txt timm') == \
        ['pip install -r requirements/no_such.txt timm: no file requirements/no_such.txt']
    assert bad_pip_installs('pip install "/path/to/mmevt[timm]"; pip install -e . ; '
                            'pip install dist/mmevt-0.1.0-py3-none-any.whl fvcore; '
                            'pip install -r requirements/docs.txt') == []


def package_version() -> str:
    with open(osp.join(REPO, 'mmevt', '__init__.py')) as f:
        return re.search(r"^__version__ = '([^']+)'", f.read(), re.M)[1]


def test_the_versions_the_pages_name_are_the_packages():
    version = package_version()
    readme = open(osp.join(REPO, 'README.md')).read()
    news = readme.split('## News')[1].split('\n## ')[0]
    assert set(re.findall(r'\b\d+\.\d+\.\d+\b', news)) == {version}, news
    changelog = open(osp.join(DOCS, 'changelog.md')).read()
    assert version in re.findall(r'^## (.*)$', changelog, re.M)[0]
    for page in pages():  # a wheel's file name carries the version
        for found in re.findall(r'\bmmevt-(\d+\.\d+\.\d+)-py3', open(page).read()):
            assert found == version, (rel(page), found)


def test_pages_say_what_make_test_does_without_root():
    # the installers of the two root-only parts exit 0 without root outside CI, so make test
    # runs the rest and those tests skip: a page saying make test needs root says so too
    for script in ('tools/install_slurm.sh', 'tools/install_browser.sh'):
        text = open(osp.join(REPO, script)).read()
        branch = text.split('"$(id -u)" != 0')[1].split('\nfi')[0]
        assert 'exit 0' in branch and 'skip' in branch, script
    for page in pages():
        for para in re.split(r'\n\s*\n', prose(open(page).read())):
            if '`make test`' in para and re.search(r'\b(?:needs?|requires?)\b[^.]{0,40}\broot\b',
                                                    para):
                assert 'skip' in para, f'{rel(page)}: {para[:200]}'


def test_the_hosting_config_builds_as_make_docs_does():
    """``.readthedocs.yml`` runs what ``make docs`` runs: the same zoo check before Sphinx,
    the same conf.py, warnings as errors; its requirements pin the Sphinx packages as the
    environment ``make docs`` uses does."""
    import yaml
    with open(osp.join(REPO, '.readthedocs.yml')) as f:
        rtd = yaml.safe_load(f)
    make = open(osp.join(REPO, 'Makefile')).read()
    recipe = re.search(r'^docs:.*\n((?:\t.*\n)+)', make, re.M)[1]
    steps = [ln.strip().replace('$(PY) ', 'python ') for ln in recipe.splitlines()
             if not ln.strip().startswith('@')]
    assert steps[0] == rtd['build']['jobs']['pre_build'][0]
    sphinx = steps[1].split()
    assert sphinx[:3] == ['python', '-m', 'sphinx'] and '-W' in sphinx
    assert sphinx[sphinx.index('-b') + 1] == rtd['sphinx']['builder']
    assert rtd['sphinx']['fail_on_warning'] is True
    assert rtd['sphinx']['configuration'] == 'docs/conf.py' and 'docs' in sphinx
    assert rtd['build']['tools']['python'] == '3.11'
    docs_req = [r['requirements'] for r in rtd['python']['install']]
    assert docs_req == ['requirements/docs.txt']

    def pins(path):
        with open(osp.join(REPO, path)) as f:
            return dict(re.findall(r'^([\w.-]+)==(\S+)', f.read(), re.M))
    docs, tests = pins('requirements/docs.txt'), pins('requirements/tests.txt')
    for name in ('sphinx', 'myst-parser', 'furo'):
        assert docs[name] == tests[name], name
    assert docs['torch'] == pins('requirements/torch.txt')['torch']
    assert docs['mmengine'] == pins('requirements/upstream.txt')['mmengine']


def test_licence_and_citation_agree_with_the_package():
    import tomllib

    import yaml
    with open(osp.join(REPO, 'pyproject.toml'), 'rb') as f:
        project = tomllib.load(f)['project']
    licence = open(osp.join(REPO, 'LICENSE')).read()
    assert project['license'] == 'Apache-2.0'
    assert 'Apache License' in licence and 'Version 2.0, January 2004' in licence
    with open(osp.join(REPO, 'CITATION.cff')) as f:
        cff = yaml.safe_load(f)
    assert cff['cff-version'] == '1.2.0' and cff['license'] == project['license']
    assert cff['version'] == project['version']
    titles = {r['title']: r for r in cff['references']}
    assert 'RMT: Retentive Networks Meet Vision Transformers' in titles
    assert 'Advancing Vision Transformer with Enhanced Spatial Priors' in titles
    assert all(r['authors'] for r in cff['references'])
    bib = open(osp.join(DOCS, 'citation.md')).read()
    assert '2604.18549' in bib and '2309.11523' in bib


# ------------------------------------------------------------ the site in a headless browser
ARTEFACTS = os.environ.get('MMEVT_TEST_ARTEFACTS',
                           osp.join(REPO, 'work_dirs', 'test-artefacts'))


def _chromium(*args: str) -> str:
    import shutil
    import subprocess
    exe = shutil.which('chromium') or shutil.which('chromium-browser')
    if exe is None:
        reason = ("no chromium for the site's browser check: as root, make browser "
                  '(tools/install_browser.sh; make test does it)')
        if os.environ.get('CI'):
            pytest.fail(f'CI runs the browser check: {reason}')
        pytest.skip(reason)
    proc = subprocess.run([exe, '--headless', '--no-sandbox', '--disable-gpu',
                           '--virtual-time-budget=10000', *args], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_site_renders_and_searches_in_a_browser(site):
    """Debian's chromium, headless, opens the built site: the front page, the zoo and a task
    page (classification) render (a screenshot of each is kept under
    ``$MMEVT_TEST_ARTEFACTS``, default ``work_dirs/test-artefacts/docs-site/``), and the
    site's search (JavaScript over its index) finds ``frozen_stages`` on the backbone page."""
    out = osp.join(ARTEFACTS, 'docs-site')
    os.makedirs(out, exist_ok=True)
    for page, must in (('index', 'EVT'), ('zoo', '<table'),
                       ('classification', 'class="highlight')):
        url = (site / f'{page}.html').as_uri()
        dom = _chromium('--dump-dom', url)
        assert must in dom and 'sidebar-tree' in dom, page  # the theme's navigation too
        shot = osp.join(out, f'{page}.png')
        if osp.exists(shot):
            os.remove(shot)
        _chromium('--window-size=1280,1600', f'--screenshot={shot}', url)
        with open(shot, 'rb') as f:
            png = f.read()
        assert png.startswith(b'\x89PNG') and len(png) > 20000, (page, len(png))
    found = _chromium('--dump-dom', (site / 'search.html').as_uri() + '?q=frozen_stages')
    hits = re.findall(r'<li[^>]*><a href="([^"#?]+)', found)
    assert 'backbone.html' in hits, hits
