"""torchrun for preemptible runs: ``python -m mmevt.apis.torchrun [torchrun options]``.

``tools/dist_train.sh`` / ``tools/dist_test.sh`` start the ranks with this instead of
``python -m torch.distributed.run``; every torchrun option works unchanged. What differs is
the preemption signals (``SIGTERM`` and ``SIGUSR1``, :class:`PreemptionCheckpointHook`'s):

- torchrun starts each rank in a session of its own, so ``kill -TERM -PGID`` of the launcher
  (what a terminal, a batch system or ``timeout`` sends) reaches the launcher only. On
  ``SIGTERM`` torchrun 2.14 sends the signal on to the ranks but kills them with ``SIGKILL``
  after its shutdown timeout, and a ``SIGUSR1`` (not among the signals it handles by default)
  ends torchrun and leaves the ranks running, unsignalled. Here the launcher forwards both to
  every rank's process group (the rank and its dataloader workers), as often as it receives
  them, and keeps monitoring the ranks: they save at their next iteration boundary and exit.
- When every rank that failed exited with :data:`PREEMPTED_EXIT_CODE` (the ranks saved and
  stopped), the launcher exits with it too, where torchrun would exit with 1.

Other signals (``SIGINT``, ``SIGHUP``, ``SIGQUIT``) keep torchrun's handling.
"""
import os
import signal
import sys
from typing import List, Optional

from ..engine.preemption import PREEMPTED_EXIT_CODE

FORWARDED = (signal.SIGTERM, signal.SIGUSR1)
TORCHRUN_HANDLED = 'SIGINT,SIGHUP,SIGQUIT'  # torchrun's defaults less the forwarded ones


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


def main(argv: Optional[List[str]] = None) -> None:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    argv = sys.argv[1:] if argv is None else list(argv)
    for number in FORWARDED:
        signal.signal(number, forward_to_ranks)
    try:
        run.main([f'--signals-to-handle={TORCHRUN_HANDLED}'] + argv)
    except ChildFailedError as error:
        code = exit_code_of(error.failures)
        if code == PREEMPTED_EXIT_CODE:
            print(f'mmevt.apis.torchrun: every rank saved and exited with {code} '
                  '(preempted); exiting with it', file=sys.stderr, flush=True)
            raise SystemExit(code)
        raise


if __name__ == '__main__':
    main()
