"""One rank of :mod:`mmevt.apis.torchrun`: ``python -u rank_guard.py [--module | --no-python]
TARGET ARGS...`` asks the kernel to SIGKILL this process when the launcher that started it
ends (``prctl(PR_SET_PDEATHSIG)``, which ``exec`` keeps), then becomes the rank torchrun would
have started (``python -u TARGET ARGS``, ``python -u -m TARGET ARGS`` or ``TARGET ARGS``):
the same pid, arguments and environment. So no rank outlives its launcher, whatever ended the
launcher (a signal torchrun does not handle, SIGKILL, a crash). Run by path, not as a module:
it imports nothing of mmevt, and the rank pays no second start-up.
"""
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def main() -> None:
    args = sys.argv[1:]
    mode = args.pop(0) if args and args[0] in ('--module', '--no-python') else None
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL)) != 0:
        raise OSError(ctypes.get_errno(), 'rank_guard: prctl(PR_SET_PDEATHSIG) failed')
    # the launcher may have ended before the request above: then nothing would signal us
    # (MMEVT_LAUNCHER_PID: torchrun.LAUNCHER_PID_ENV, written out: this file imports nothing)
    if str(os.getppid()) != os.environ.get('MMEVT_LAUNCHER_PID', str(os.getppid())):
        sys.exit('rank_guard: the launcher has ended; not starting the rank')
    if mode == '--no-python':
        os.execvp(args[0], args)
    python = [sys.executable, '-u'] + (['-m'] if mode == '--module' else [])
    os.execv(sys.executable, python + args)


if __name__ == '__main__':
    main()
