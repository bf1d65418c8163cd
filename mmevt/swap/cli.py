"""``mmevt-swap`` (``tools/misc/swap_backbone.py``): arguments, the swap, the printed counts."""
import argparse
import sys
from typing import List, Optional

from ..analysis import MEGA
from ..toolkits import TOOLKITS
from ..utils.user_errors import exit_on_user_error
from .plan import swap_config
from .smoke import flops_or_none, smoke_test_config


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments: SRC, ``--arch``, ``--out`` and the options."""
    parser = argparse.ArgumentParser(
        prog='mmevt-swap', description='Write a config that inherits SRC with EVT as its '
        'backbone (the consumers of the backbone remapped, our recipe), optionally check it.')
    parser.add_argument('src', help='config file, or a ' + ' / '.join(
        f"'{name}::'" for name in TOOLKITS) + ' path')
    parser.add_argument('--arch', required=True,
                        help='EVT arch, e.g. evt-t, evt-s, evt-swin-t')
    parser.add_argument('--out', required=True, help='the config to write (DST, .py)')
    parser.add_argument('--pretrained', help='backbone checkpoint (init_cfg); keys under '
                        "'backbone.' as in an mmevt classifier checkpoint")
    parser.add_argument('--recipe', default='evt', choices=('evt', 'keep'),
                        help="'evt': our family's optimizer, drop path and SyncBN; 'keep': "
                        "SRC's optimizer (default: evt)")
    parser.add_argument('--check', action='store_true', help='build DST, run one training '
                        'step and one prediction on a generated batch, print params / FLOPs')
    parser.add_argument('--overwrite', action='store_true', help='replace an existing DST')
    return parser


def _millions(n: Optional[int]) -> str:
    """A count in millions as printed (``'n/a'`` for a count that failed)."""
    return 'n/a' if n is None else f'{n / MEGA:.2f} M'


def main(argv: Optional[List[str]] = None) -> None:
    """Write DST; with ``--check`` smoke-test it and print params / FLOPs before and after.

    Args:
        argv (list[str], optional): the arguments. Defaults to None (``sys.argv[1:]``).
    """
    args = build_parser().parse_args(argv)
    command = 'mmevt-swap ' + ' '.join(sys.argv[1:] if argv is None else argv)
    # with --check SRC's whole model is built once, for the probe and the counts
    plan, _, original = swap_config(args.src, args.arch, args.out, args.pretrained,
                                    args.recipe, args.overwrite, command,
                                    count_source=args.check)
    if not args.check:
        return
    result = smoke_test_config(args.out, stages=plan.stages)
    height, width = result.input_hw  # the smoke test's batch: its FLOPs were counted there
    # a 2D recognizer's backbone runs on each frame: a clip's FLOPs, before as after
    before_flops = flops_or_none(original, result.input_hw, result.segments or 1)
    print(f'params (whole model): {_millions(plan.source_params)} -> '
          f'{_millions(result.params)}')
    at = f'{result.segments} segments x ' if result.segments else ''
    print(f'backbone FLOPs at {at}{height} x {width}: {_millions(before_flops)} -> '
          f'{_millions(result.backbone_flops)} (multiply-adds, mmengine)')


def cli(argv: Optional[List[str]] = None) -> None:
    """:func:`main` with user errors as a one-line message and exit status 1."""
    exit_on_user_error(main, 'mmevt-swap', argv)
