"""``python -m mmevt.info``: the installed stack and mmevt's patches, for bug reports."""
import platform
import sys
from importlib import metadata
from typing import List

# distributions worth naming in a report, beside each stack's own (mmevt.stack.STACKS)
OTHERS = ('torch', 'torchvision', 'setuptools', 'numpy', 'mmdeploy', 'onnxruntime', 'fvcore',
          'shapely', 'faster_coco_eval')


def report() -> List[str]:
    """The report's lines: Python, the stack and its versions, then the patch table."""
    import mmevt
    from mmevt import patches, stack
    lines = [f'mmevt {mmevt.__version__} ({mmevt.__file__})',
             f'Python {platform.python_version()} ({sys.executable})',
             f'stack: {stack.detect_stack() or "unknown (no single mmengine distribution)"}']
    # each stack's tested distributions, then the toolkits beyond them (mmpose, mmaction2,
    # and mmrotate under its stack's name), then the others; each once
    names = dict.fromkeys([d for s in stack.STACKS.values() for d in s.tested]
                          + [t.dist for ts in stack.TOOLKIT_MMCV.values() for t in ts]
                          + list(OTHERS))
    for name in names:
        try:
            lines.append(f'  {name} {metadata.version(name)}')
        except metadata.PackageNotFoundError:
            pass
    try:
        import pkg_resources  # noqa: F401
        has_pkg_resources = 'importable'
    except ImportError:
        has_pkg_resources = 'not importable'
    unavailable = stack.unavailable_text()
    lines += [f'  pkg_resources: {has_pkg_resources}',
              f'toolkits EVT is registered in: {mmevt.REGISTERED_TOOLKITS}'
              + (f' ({unavailable})' if unavailable else ''),
              f'supported: {stack.supported_text()}', '', 'patches of other libraries:']
    return lines + ['  ' + line for line in patches.describe()]


def main() -> None:
    print('\n'.join(report()))


if __name__ == '__main__':
    main()
