"""The OpenMMLab stack mmevt runs on: upstream OpenMMLab or the maintained onedl fork.

Both ship the same modules (``mmengine``, ``mmcv``, ``mmdet``, ``mmseg``, ``mmpretrain``)
under different distribution names; :data:`STACKS` lists what mmevt supports on each, and
:func:`check_stack` (run by ``import mmevt``) refuses anything else with an error naming the
installed versions and both stacks. mmengine is required; mmcv is checked where installed
(the backbone itself needs only torch and mmengine).

A stack's mmcv range is the widest its toolkits import with; a toolkit whose own range
(:data:`TOOLKIT_MMCV`) leaves out the installed mmcv is unavailable
(:func:`unavailable_toolkits`): ``import mmevt`` warns and skips it, and works for the rest.
"""
import re
import warnings
from importlib import metadata
from typing import Dict, List, NamedTuple, Optional, Tuple


class Stack(NamedTuple):
    """One supported stack: distribution names with their supported ``[low, high)`` ranges
    and the versions this project tests."""
    title: str
    mmengine: Tuple[str, str, str]  # distribution, lowest supported, first unsupported
    mmcv: Tuple[str, str, str]
    tested: Dict[str, str]


STACKS: Dict[str, Stack] = {
    'upstream': Stack(
        'upstream OpenMMLab', ('mmengine', '0.10.0', '0.11.0'),
        # the widest its toolkits import with (mmpretrain 1.2.0's); mmdet, mmseg and mmpose
        # stop at 2.2.0 (TOOLKIT_MMCV). PyPI's mmcv releases end at 2.2.0.
        ('mmcv', '2.0.0', '2.4.0'),
        {'mmengine': '0.10.7', 'mmcv': '2.1.0', 'mmdet': '3.3.0', 'mmsegmentation': '1.2.2',
         'mmpretrain': '1.2.0'}),
    'fork': Stack(
        'onedl fork (VBTI-development)', ('onedl-mmengine', '0.10.8', '0.11.0'),
        # onedl-mmpretrain 1.3.6 asserts mmcv < 2.4.0; PyPI has onedl-mmcv 2.3.0 - 2.3.6 only
        ('onedl-mmcv', '2.2.0', '2.4.0'),
        {'onedl-mmengine': '0.10.12', 'onedl-mmcv': '2.3.6', 'onedl-mmdetection': '3.5.1',
         'onedl-mmsegmentation': '1.4.2', 'onedl-mmpretrain': '1.3.6'}),
}


class ToolkitRange(NamedTuple):
    """The mmcv versions one toolkit, at the version a stack tests, imports with."""
    module: str  # the toolkit's module, as in mmevt.toolkits.TOOLKITS
    dist: str  # its distribution on that stack
    low: Optional[str]  # lowest mmcv it accepts (None: no lower bound)
    high: Optional[str]  # first mmcv it refuses (None: no upper bound)
    why: str  # the bound and where it comes from (the toolkit's file and lines)


# Read from each distribution's own files (pip download --no-deps <dist>==<version>).
TOOLKIT_MMCV: Dict[str, Tuple[ToolkitRange, ...]] = {
    'upstream': (
        ToolkitRange('mmdet', 'mmdet', '2.0.0rc4', '2.2.0',
                     'mmdet 3.3.0 asserts mmcv>=2.0.0rc4,<2.2.0 at import '
                     '(mmdet/__init__.py:8-19)'),
        ToolkitRange('mmseg', 'mmsegmentation', '2.0.0rc4', '2.2.0',
                     'mmsegmentation 1.2.2 asserts mmcv>=2.0.0rc4,<2.2.0 at import '
                     '(mmseg/__init__.py:10-11,61)'),
        ToolkitRange('mmpretrain', 'mmpretrain', '2.0.0', '2.4.0',
                     'mmpretrain 1.2.0 asserts mmcv>=2.0.0,<2.4.0 at import '
                     '(mmpretrain/__init__.py:9-20)'),
        # mmpose's own assert allows mmcv <= 3.0.0 (mmpose/__init__.py:8-19), but
        # mmpose.models imports mmdet (mmpose/models/heads/hybrid_heads/rtmo_head.py:9)
        ToolkitRange('mmpose', 'mmpose', '2.0.0rc4', '2.2.0',
                     'mmpose 1.3.2 imports mmdet in mmpose.models '
                     '(mmpose/models/heads/hybrid_heads/rtmo_head.py:9), and mmdet 3.3.0 '
                     'asserts mmcv<2.2.0'),
        ToolkitRange('mmaction', 'mmaction2', '2.0.0rc4', '2.2.0',
                     'mmaction2 1.2.0 asserts mmcv>=2.0.0rc4,<2.2.0 at import '
                     '(mmaction/__init__.py:8-19)'),
        # '<= 2.1.0' in its assert: 2.1.1 would be the first refused release
        ToolkitRange('mmrotate', 'mmrotate-dev', '2.0.0rc4', '2.1.1',
                     'mmrotate-dev 1.0.1 asserts mmcv>=2.0.0rc4,<=2.1.0 at import '
                     '(mmrotate/__init__.py:9-17)'),
    ),
    'fork': (  # no fork of mmpose or mmaction2
        ToolkitRange('mmdet', 'onedl-mmdetection', '2.0.0', None,
                     'onedl-mmdetection 3.5.1 requires onedl-mmcv>=2.0.0 '
                     '(its mminstall extra, pyproject.toml:93); no mmcv assert at import '
                     '(mmdet/__init__.py)'),
        ToolkitRange('mmseg', 'onedl-mmsegmentation', None, None,
                     'onedl-mmsegmentation 1.4.2 requires onedl-mmcv, unversioned (its '
                     'mminstall extra, pyproject.toml:67); no mmcv assert at import '
                     '(mmseg/__init__.py)'),
        ToolkitRange('mmpretrain', 'onedl-mmpretrain', '2.0.0', '2.4.0',
                     'onedl-mmpretrain 1.3.6 asserts mmcv>=2.0.0,<2.4.0 at import '
                     '(mmpretrain/__init__.py:9-20)'),
        ToolkitRange('mmrotate', 'onedl-mmrotate', None, None,
                     'onedl-mmrotate 1.2.1 requires onedl-mmcv, unversioned (its mminstall '
                     'extra, pyproject.toml:99-100); no mmcv assert at import '
                     '(mmrotate/__init__.py)'),
    ),
}


def _version_tuple(version: str) -> Tuple[int, ...]:
    # the release part: '0.10.8rc1' -> (0, 10, 8), '2.1.0+cu130' -> (2, 1, 0)
    match = re.match(r'\d+(\.\d+)*', version)
    return tuple(int(p) for p in match.group().split('.')) if match else ()


def _in_range(version: str, low: Optional[str], high: Optional[str]) -> bool:
    # None: that side is unbounded
    return ((low is None or _version_tuple(low) <= _version_tuple(version))
            and (high is None or _version_tuple(version) < _version_tuple(high)))


def _installed(dist: str) -> Optional[str]:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def installed_distributions(module: str) -> Dict[str, str]:
    """``{distribution: version}`` of the stacks' distributions of ``module`` installed here
    (``'mmengine'`` or ``'mmcv'``; two entries mean both stacks wrote the same files)."""
    found = {}
    for stack in STACKS.values():
        dist = getattr(stack, module)[0]
        version = _installed(dist)
        if version is not None:
            found[dist] = version
    return found


def detect_stack() -> Optional[str]:
    """``'upstream'`` or ``'fork'``: whose mmengine distribution is installed (None when
    mmengine has no distribution record, e.g. a copy on ``PYTHONPATH``, or both have)."""
    found = installed_distributions('mmengine')
    names = [name for name, stack in STACKS.items() if stack.mmengine[0] in found]
    return names[0] if len(names) == 1 else None


def supported_text() -> str:
    """Both stacks' supported ranges, for error messages and ``python -m mmevt.info``."""
    return '; '.join(f'{s.title}: {s.mmengine[0]}>={s.mmengine[1]},<{s.mmengine[2]} with '
                     f'{s.mmcv[0]}>={s.mmcv[1]},<{s.mmcv[2]}' for s in STACKS.values())


def stack_problems() -> List[str]:
    """What is wrong with the installed mmengine / mmcv for mmevt (empty when supported).

    A mmengine without a distribution record (a source copy on ``PYTHONPATH``) is checked by
    its ``__version__`` against either stack's range.
    """
    problems = []
    found = {module: installed_distributions(module) for module in ('mmengine', 'mmcv')}
    for module, dists in found.items():
        if len(dists) > 1:
            problems.append(f'both {" and ".join(f"{d} {v}" for d, v in dists.items())} are '
                            f'installed; they write the same {module}/ files: uninstall both '
                            'and install one stack')
            continue
        for dist, version in dists.items():
            stack = next(s for s in STACKS.values() if getattr(s, module)[0] == dist)
            _, low, high = getattr(stack, module)
            if not _in_range(version, low, high):
                problems.append(f'{dist} {version} is installed; mmevt supports '
                                f'{dist}>={low},<{high}')
    engine, cv = found['mmengine'], found['mmcv']
    if len(engine) == 1 and len(cv) == 1:
        engine_stack = [n for n, s in STACKS.items() if s.mmengine[0] in engine]
        cv_stack = [n for n, s in STACKS.items() if s.mmcv[0] in cv]
        if engine_stack != cv_stack:
            problems.append(f'{next(iter(engine))} ({engine_stack[0]}) is installed with '
                            f'{next(iter(cv))} ({cv_stack[0]}): use one stack for both')
    if not engine:
        import mmengine
        version = getattr(mmengine, '__version__', '0')
        if not any(_in_range(version, *s.mmengine[1:]) for s in STACKS.values()):
            problems.append(f'mmengine {version} (no distribution record) is imported')
    return problems


def unavailable_toolkits() -> Dict[str, str]:
    """The installed toolkits that cannot import with the installed mmcv, and why.

    Each installed toolkit of the installed mmcv's stack is checked against its own range in
    :data:`TOOLKIT_MMCV` (e.g. upstream mmcv 2.2.0: mmdet, mmseg and mmpose are unavailable,
    mmpretrain is not). Empty when no (or no single) mmcv distribution is installed.

    Returns:
        dict[str, str]: toolkit module -> why, naming the toolkit's bound and its source
        (``'mmdet 3.3.0 asserts mmcv>=2.0.0rc4,<2.2.0 at import (mmdet/__init__.py:8-19)'``).
    """
    cv = installed_distributions('mmcv')
    if len(cv) != 1:
        return {}
    (cv_dist, cv_version), = cv.items()
    stack = next(name for name, s in STACKS.items() if s.mmcv[0] == cv_dist)
    return {t.module: t.why for t in TOOLKIT_MMCV[stack]
            if _installed(t.dist) is not None and not _in_range(cv_version, t.low, t.high)}


def unavailable_text() -> str:
    """:func:`unavailable_toolkits` as one line naming the installed mmcv (empty when every
    installed toolkit can import), for the import warning and ``python -m mmevt.info``."""
    unavailable = unavailable_toolkits()
    if not unavailable:
        return ''
    cv = ', '.join(f'{d} {v}' for d, v in installed_distributions('mmcv').items())
    return (f'{", ".join(unavailable)} cannot import with {cv} (EVT is not registered '
            f'there): {"; ".join(unavailable.values())}')


def check_stack() -> None:
    """Raise if the installed mmengine / mmcv are not a stack mmevt supports
    (:func:`stack_problems`); else warn, in one warning, naming the toolkits the installed
    mmcv leaves unavailable (:func:`unavailable_toolkits`).

    Raises:
        ImportError: mmengine is missing, or a version or combination is not supported.
    """
    try:
        import mmengine  # noqa: F401
    except ImportError as err:
        raise ImportError(f'mmevt needs mmengine, from one of the supported stacks '
                          f'({supported_text()}); e.g. from a clone of mmevt: '
                          'pip install ".[upstream]" or ".[fork]"') from err
    problems = stack_problems()
    if problems:
        raise ImportError('mmevt cannot run on this OpenMMLab stack: ' + '; '.join(problems)
                          + f'. Supported: {supported_text()}.')
    unavailable = unavailable_text()
    if unavailable:
        warnings.warn(f'mmevt: {unavailable}', stacklevel=2)
