"""torchrun for preemptible runs: ``python -m mmevt.apis.torchrun [torchrun options]``.

``tools/dist_train.sh`` / ``tools/dist_test.sh`` start the ranks with this instead of
``python -m torch.distributed.run``; every torchrun option works unchanged. What differs:

- **The run's stop signals are forwarded.** torchrun starts each rank in a session of its
  own, so ``kill -SIG -PGID`` of the launcher (what a terminal, a batch system or
  ``timeout`` sends) reaches the launcher only. The launcher reads the signals the run's
  config gives its ``PreemptionCheckpointHook`` (:mod:`mmevt.apis.run_signals`) and sends
  each one it receives on to every rank's process group (the rank and its dataloader
  workers), as often as it receives them, while it keeps monitoring the ranks: they save at
  their next iteration boundary and exit. torchrun itself would kill the ranks after its
  shutdown timeout on SIGTERM, and die of any signal outside its ``--signals-to-handle``.
  Every other signal keeps torchrun's handling; a config without the hook forwards none.
- **No rank outlives the launcher.** Each rank starts through :mod:`mmevt.apis.rank_guard`,
  which has the kernel send it SIGKILL when the launcher ends (``PR_SET_PDEATHSIG``), for
  whatever reason: a signal torchrun does not handle, SIGKILL, a crash.
- **The preemption exit code passes through.** When every rank that failed exited with
  :data:`PREEMPTED_EXIT_CODE` (the ranks saved and stopped), the launcher exits with it too,
  where torchrun would exit with 1.
"""
import os
import os.path as osp
import signal
import sys
from typing import List, Optional, Sequence

from ..engine.preemption import PREEMPTED_EXIT_CODE
from ..engine.stop_signals import signal_name
from .run_signals import stop_signals_of_run

RANK_GUARD = osp.join(osp.dirname(osp.abspath(__file__)), 'rank_guard.py')
LAUNCHER_PID_ENV = 'MMEVT_LAUNCHER_PID'


def child_pids(parent: int) -> List[int]:
    """The pids of ``parent``'s children (Linux ``/proc``)."""
    children = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat') as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        if int(stat.rsplit(')', 1)[1].split()[1]) == parent:
            children.append(int(entry))
    return children


def forward_to_ranks(number: int, frame: object = None) -> None:
    """Send signal ``number`` to the process group of each child that leads its own group
    (torchrun's ranks, with their dataloader workers), to the child alone otherwise."""
    for pid in child_pids(os.getpid()):
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, number)
            else:
                os.kill(pid, number)
        except ProcessLookupError:
            pass


def exit_code_of(failures: dict) -> int:
    """The launcher's exit code for torchrun's failed ranks (``ChildFailedError.failures``):
    :data:`PREEMPTED_EXIT_CODE` if every one exited with it, otherwise torchrun's 1."""
    codes = {failure.exitcode for failure in failures.values()}
    return PREEMPTED_EXIT_CODE if codes == {PREEMPTED_EXIT_CODE} else 1


def torchrun_signals(handled: str, forwarded: Sequence[int]) -> str:
    """torchrun's ``--signals-to-handle`` (``handled``) less the ``forwarded`` ones."""
    names = {signal_name(n) for n in forwarded}
    return ','.join(s for s in handled.split(',') if s.strip() and s.strip() not in names)


def guard_ranks(args) -> None:
    """Start each rank of torchrun's parsed ``args`` through :mod:`mmevt.apis.rank_guard`
    (``python -u rank_guard.py [--module | --no-python] TARGET ARGS``)."""
    if args.no_python:
        mode = ['--no-python']
    elif args.module:
        mode = ['--module']
    else:
        mode = []
    args.training_script_args = mode + [args.training_script] + list(args.training_script_args)
    args.training_script, args.module, args.no_python = RANK_GUARD, False, False


def main(argv: Optional[List[str]] = None) -> None:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record
    args = run.parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        forwarded = stop_signals_of_run(args.training_script_args) or ()
    except ValueError as error:  # a hook signal no launcher can forward: refused at start
        raise SystemExit(f'mmevt.apis.torchrun: {error}')
    for number in forwarded:
        signal.signal(number, forward_to_ranks)
    args.signals_to_handle = torchrun_signals(args.signals_to_handle, forwarded)
    os.environ[LAUNCHER_PID_ENV] = str(os.getpid())  # the ranks' environment
    if not args.run_path:  # (--run-path runs the script in this process: no ranks to guard)
        guard_ranks(args)
    try:
        record(run.run)(args)  # what run.main does once it has parsed the arguments
    except ChildFailedError as error:
        code = exit_code_of(error.failures)
        if code == PREEMPTED_EXIT_CODE:
            print(f'mmevt.apis.torchrun: every rank saved and exited with {code} '
                  '(preempted); exiting with it', file=sys.stderr, flush=True)
            raise SystemExit(code)
        raise


if __name__ == '__main__':
    main()
