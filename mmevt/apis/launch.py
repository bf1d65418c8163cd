"""Run a toolkit's own ``tools/train.py`` / ``tools/test.py`` for an mmevt config.

The toolkit is chosen from the config's ``default_scope`` (one of
:data:`mmevt.toolkits.TOOLKITS`), so
every option of that toolkit's tool (``--work-dir``, ``--resume``, ``--amp``,
``--cfg-options``, ``--launcher``, ``--show-dir`` ...) works unchanged.
"""
import importlib.util
import os.path as osp
import runpy
import sys
from typing import List, Optional

from ..toolkits import TOOLKITS, config_toolkit


def find_config_arg(argv: List[str]) -> str:
    """The config path: the first positional argument."""
    for arg in argv:
        if not arg.startswith('-'):
            return arg
    raise ValueError('no config file given; usage: tools/train.py CONFIG [options]')


def toolkit_of(config: str) -> str:
    """The toolkit owning ``config``, read from its ``default_scope``."""
    from mmengine.config import Config
    if not osp.isfile(config):
        raise FileNotFoundError(f'config file {config!r} does not exist')
    from ..patches import patches_needed
    with patches_needed('package-lookup', 'config-prefix'):
        return config_toolkit(Config.fromfile(config), config)


def toolkit_tool_path(toolkit: str, tool: str) -> str:
    """Path of ``tools/<tool>.py`` shipped inside the installed toolkit (``.mim``)."""
    spec = importlib.util.find_spec(toolkit)
    if spec is None or spec.origin is None:
        raise ImportError(f'{toolkit} is not installed; run `make test` or '
                          '`tools/bootstrap.sh` to create the environment')
    path = osp.join(osp.dirname(spec.origin), '.mim', 'tools', f'{tool}.py')
    if not osp.isfile(path):
        raise FileNotFoundError(f'{toolkit} does not ship {tool}.py at {path}')
    return path


def run_toolkit_tool(tool: str, argv: Optional[List[str]] = None) -> None:
    """Import mmevt, then run ``<toolkit>/.mim/tools/<tool>.py`` with ``argv``."""
    import mmevt  # noqa: F401  registers EVT and allow-lists checkpoint classes
    argv = sys.argv[1:] if argv is None else argv
    if {'-h', '--help'} & set(argv) and not any(not a.startswith('-') for a in argv):
        # asked for help without a config (mim train / test ask so): the options are the
        # toolkit's, which only the config names
        print(f'usage: tools/{tool}.py CONFIG [options]\n\nRuns the {tool}.py of the '
              f"toolkit of CONFIG's default_scope ({', '.join(TOOLKITS)}) with all its "
              f'options; `tools/{tool}.py CONFIG -h` lists them.')
        return
    path = toolkit_tool_path(toolkit_of(find_config_arg(argv)), tool)
    sys.argv = [path] + list(argv)
    runpy.run_path(path, run_name='__main__')
