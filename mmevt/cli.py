"""Console entry points of the wheel (``[project.scripts]`` in ``pyproject.toml``).

``mmevt-train CONFIG [options]`` and ``mmevt-test CONFIG CHECKPOINT [options]`` are
``tools/train.py`` / ``tools/test.py``: they import mmevt (so ``mmevt::`` bases and EVT
resolve), pick the toolkit from the config's ``default_scope`` and run that toolkit's own
tool with every option it has. ``mmevt-onnx`` is ``tools/deployment/pytorch2onnx.py``,
``mmevt-deploy`` ``tools/deployment/deploy.py``, ``mmevt-swap``
``tools/misc/swap_backbone.py``.
"""
from .apis import run_toolkit_tool


def train() -> None:
    """``mmevt-train``: the toolkit's ``tools/train.py`` on an mmevt (or user) config."""
    run_toolkit_tool('train')


def test() -> None:
    """``mmevt-test``: the toolkit's ``tools/test.py`` on an mmevt (or user) config."""
    run_toolkit_tool('test')


def onnx() -> None:
    """``mmevt-onnx``: export to ONNX (see :mod:`mmevt.deploy.onnx_export`)."""
    from .deploy.cli import onnx_cli
    onnx_cli()


def deploy() -> None:
    """``mmevt-deploy``: deploy with mmdeploy to ONNX Runtime (see
    :mod:`mmevt.deploy.mmdeploy_export`)."""
    from .deploy.cli import deploy_cli
    deploy_cli()


def swap() -> None:
    """``mmevt-swap``: write a config with EVT swapped in (see :mod:`mmevt.swap`)."""
    from .swap import cli
    cli()
