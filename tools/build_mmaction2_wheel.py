"""Build mmaction2 1.2.0's released sdist into the wheel mmevt installs, ``1.2.0+mmevt1``.

Usage: ``python tools/build_mmaction2_wheel.py SDIST WHEEL_DIR`` (run by tools/bootstrap.sh
on the upstream stack; requirements/action-upstream.txt says why, and
``mmevt.patches.PATCHES`` lists it as 'mmaction2-drn-stub').

Two defects of the release, fixed in the wheel and nowhere else:

- ``mmaction/models/localizers/__init__.py`` imports the ``drn`` package, which neither the
  sdist nor PyPI's wheel holds (open-mmlab/mmaction2#2714): ``import mmaction.models`` fails.
  ``tools/patches/mmaction2-1.2.0/`` holds a stand-in (``DRN`` registered; building it
  raises, citing the issue), copied into the tree before the build.
- ``setup.py`` reads its dependencies from ``requirements/*.txt``, which the sdist lacks, so a
  wheel built from it would declare none. They are written back from the sdist's own
  ``mmaction2.egg-info/requires.txt``: the ``Requires-Dist`` of PyPI's 1.2.0 wheel.

The version gets the local label ``+mmevt1`` (PEP 440), so ``pip list`` tells the wheel from
PyPI's, and pip's RECORD lists every file it installs (a clean ``pip uninstall``).
"""
import os
import os.path as osp
import shutil
import subprocess
import sys
import tarfile
import tempfile

NAME, VERSION, LABEL = 'mmaction2', '1.2.0', 'mmevt1'
OVERLAY = osp.join(osp.dirname(osp.abspath(__file__)), 'patches', f'{NAME}-{VERSION}')
# requires.txt's sections -> the files setup.py reads them from (its install_requires and
# extras_require)
REQUIREMENT_FILES = {'': 'requirements/build.txt', 'all': 'requirements.txt',
                     'tests': 'requirements/tests.txt', 'optional': 'requirements/optional.txt',
                     'mim': 'requirements/mminstall.txt',
                     'multimodal': 'requirements/multimodal.txt'}


def requires_sections(text: str) -> dict:
    """``requires.txt`` (setuptools' egg-info) -> {section: [requirement lines]}."""
    sections, current = {'': []}, ''
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith('['):
            current = line.strip('[]')
            sections.setdefault(current, [])
        else:
            sections[current].append(line)
    return sections


def patch_tree(tree: str) -> None:
    """Apply both fixes and the version label to the unpacked sdist ``tree``."""
    shutil.copytree(OVERLAY, tree, dirs_exist_ok=True)
    with open(osp.join(tree, f'{NAME}.egg-info', 'requires.txt')) as f:
        sections = requires_sections(f.read())
    unknown = set(sections) - set(REQUIREMENT_FILES)
    assert not unknown, f'requires.txt sections setup.py does not read: {unknown}'
    for section, path in REQUIREMENT_FILES.items():
        if not osp.exists(osp.join(tree, path)):
            os.makedirs(osp.dirname(osp.join(tree, path)) or tree, exist_ok=True)
            with open(osp.join(tree, path), 'w') as f:
                f.write(''.join(line + '\n' for line in sections.get(section, [])))
    version_py = osp.join(tree, 'mmaction', 'version.py')
    with open(version_py) as f:
        text = f.read()
    new = text.replace(f"__version__ = '{VERSION}'", f"__version__ = '{VERSION}+{LABEL}'")
    assert new != text, f'{version_py} does not say {VERSION}'
    with open(version_py, 'w') as f:
        f.write(new)


def build(sdist: str, wheel_dir: str) -> str:
    """The path of the wheel built from ``sdist`` into ``wheel_dir``."""
    base = osp.basename(sdist)
    if base != f'{NAME}-{VERSION}.tar.gz':
        raise ValueError(f'{sdist}: expected the sdist {NAME}-{VERSION}.tar.gz, the release '
                         'these fixes are for')
    with tempfile.TemporaryDirectory(prefix='mmevt-mmaction2-') as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter='data')
        tree = osp.join(tmp, f'{NAME}-{VERSION}')
        patch_tree(tree)
        os.makedirs(wheel_dir, exist_ok=True)
        # the venv's own setuptools (the build needs nothing else), quiet but for errors
        subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps',
                        '--no-build-isolation', '-w', wheel_dir, tree], check=True)
    wheel = osp.join(wheel_dir, f'{NAME}-{VERSION}+{LABEL}-py2.py3-none-any.whl')
    assert osp.exists(wheel), os.listdir(wheel_dir)
    return wheel


if __name__ == '__main__':
    if len(sys.argv) != 3 or not sys.argv[1].endswith('.tar.gz'):
        sys.exit(__doc__.split('\n\n')[1])
    print(build(sys.argv[1], sys.argv[2]))
