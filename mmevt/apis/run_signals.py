"""The stop signals of a run, read from its command line: the launchers' one route from the
config's ``PreemptionCheckpointHook(signals=...)`` to what they forward or ask the scheduler
for (:mod:`mmevt.engine.stop_signals`).

``tools/dist_train.sh`` / ``dist_test.sh`` (:mod:`mmevt.apis.torchrun`) call
:func:`stop_signals_of_run` on the training script's arguments; ``tools/slurm_launch.sh``
runs ``python -m mmevt.apis.run_signals --sbatch SCRIPT_ARGS...``, which prints the signal
for ``sbatch --signal=NAME@120`` (nothing when the config has no hook).
"""
import argparse
import os.path as osp
import signal
import sys
from typing import List, Optional, Sequence, Tuple

from ..engine.stop_signals import signal_name, stop_signals_of_config
from .launch import find_config_arg

CONFIG_SUFFIXES = ('.py', '.json', '.yaml', '.yml')


def config_of_script_args(args: Sequence[str]) -> Tuple[Optional[str], dict]:
    """The config file among an OpenMMLab tool's arguments (its first positional argument,
    as ``tools/train.py`` / ``tools/test.py`` of every toolkit take it) and the
    ``--cfg-options`` given with it; ``(None, {})`` when the first positional argument is no
    config file."""
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default={})
    known, rest = parser.parse_known_args(list(args))
    try:
        positional = find_config_arg(rest)
    except ValueError:  # no positional argument at all
        return None, {}
    if not positional.endswith(CONFIG_SUFFIXES) or not osp.isfile(positional):
        return None, {}
    return positional, known.cfg_options


def stop_signals_of_run(args: Sequence[str]) -> Optional[Tuple[int, ...]]:
    """The signals that stop the run of an OpenMMLab tool started with ``args`` (its config's
    ``PreemptionCheckpointHook`` signals, after ``--cfg-options``): ``()`` for a config
    without the hook, ``None`` when the arguments name no config.

    Raises:
        ValueError: the config's hook lists a signal no launcher can forward (naming it).
    """
    path, options = config_of_script_args(args)
    if path is None:
        return None
    from mmengine.config import Config

    from ..patches import patches_needed
    # as tools/train.py loads it (``pkg::`` bases resolve through mmevt's import patches)
    with patches_needed('package-lookup', 'config-prefix'):
        cfg = Config.fromfile(path, import_custom_modules=False)
    if options:
        cfg.merge_from_dict(options)
    return stop_signals_of_config(cfg)


def sbatch_signal(numbers: Sequence[int]) -> str:
    """The signal for ``sbatch --signal=NAME@T`` (without ``SIG``): the first of ``numbers``
    that is not SIGTERM (Slurm sends SIGTERM at the time limit anyway: the early signal is
    another), else SIGTERM; ``''`` for none."""
    if not numbers:
        return ''
    early = next((n for n in numbers if n != signal.SIGTERM), numbers[0])
    return signal_name(early)[len('SIG'):]


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog='python -m mmevt.apis.run_signals',
        description="Print the signals that stop a run: its config's PreemptionCheckpointHook "
        'signals, given the arguments of tools/train.py (CONFIG [--cfg-options ...]).')
    parser.add_argument('--sbatch', action='store_true',
                        help='print only the signal for sbatch --signal=NAME@TIME')
    parser.add_argument('script_args', nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        numbers = stop_signals_of_run(args.script_args)
    except ValueError as error:
        raise SystemExit(f'mmevt.apis.run_signals: {error}')
    if args.sbatch:
        print(sbatch_signal(numbers or ()))
    else:
        print(' '.join(signal_name(n) for n in numbers or ()))


if __name__ == '__main__':
    sys.exit(main())
