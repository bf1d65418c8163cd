"""The signals that stop a run: one definition for :class:`PreemptionCheckpointHook` and the
launchers that deliver them (``tools/dist_train.sh``'s :mod:`mmevt.apis.torchrun`, the Slurm
scripts).

A config chooses them in the hook's ``signals`` (default :data:`DEFAULT_STOP_SIGNALS`); the
launchers read that list from the config (:func:`stop_signals_of_config`), so a signal the
hook listens to is always one the launcher passes on. Only signals that ask a process to end
may be listed (:data:`STOP_SIGNALS_ALLOWED`): the others cannot be caught (``SIGKILL``,
``SIGSTOP``), are the launcher's own (``SIGCHLD``), belong to job control (``SIGCONT``, which
Slurm sends before every ``SIGTERM``; ``SIGTSTP``, ...) or report a fault of the process
itself (``SIGSEGV``, ``SIGPIPE``, ...), and a launcher cannot forward them as a request to
stop.
"""
import signal
from typing import Any, Iterable, Tuple, Union

DEFAULT_STOP_SIGNALS = ('SIGTERM', 'SIGUSR1')

# the termination requests of POSIX and of batch systems (Slurm, PBS, LSF: SIGXCPU / SIGPWR),
# and the real-time signals
STOP_SIGNALS_ALLOWED = tuple(
    int(getattr(signal, name)) for name in
    ('SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGXCPU', 'SIGPWR',
     'SIGALRM') if hasattr(signal, name)) + tuple(
        range(getattr(signal, 'SIGRTMIN', 0), getattr(signal, 'SIGRTMAX', -1) + 1))

HOOK_TYPE = 'PreemptionCheckpointHook'


def signal_name(number: int) -> str:
    """``SIGUSR2`` for 12; ``SIGRTMIN+2`` style names for real-time signals."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f'SIGRTMIN+{number - signal.SIGRTMIN}'


def stop_signal_numbers(signals: Iterable[Union[str, int]],
                        owner: str = HOOK_TYPE) -> Tuple[int, ...]:
    """The signal numbers of ``signals`` (names such as ``'SIGUSR2'`` or ``'USR2'``, or
    numbers), in order, without repeats.

    Raises:
        ValueError: (naming ``owner``) if ``signals`` is empty, or holds a name that is no
            signal of this platform or a signal outside :data:`STOP_SIGNALS_ALLOWED`.
    """
    if isinstance(signals, (str, int)):
        signals = (signals, )
    allowed = ', '.join(signal_name(n) for n in STOP_SIGNALS_ALLOWED
                        if n < getattr(signal, 'SIGRTMIN', 1 << 30))
    numbers = []
    for item in signals:
        if isinstance(item, int):
            number = item
        else:
            name = str(item).upper()
            found = getattr(signal, name if name.startswith('SIG') else 'SIG' + name, None)
            if not isinstance(found, signal.Signals):
                raise ValueError(f'{owner}: signals has {item!r}, which is no signal of this '
                                 f'platform; allowed: {allowed} and the real-time signals')
            number = int(found)
        if number not in STOP_SIGNALS_ALLOWED:
            shown = signal_name(number) if number in signal.valid_signals() else repr(item)
            raise ValueError(
                f'{owner}: signals has {shown}, which cannot ask a run to stop: the launcher '
                'cannot forward it (it cannot be caught, is the launcher\'s own, belongs to '
                f'job control or reports a fault); allowed: {allowed} and the real-time '
                'signals')
        if number not in numbers:
            numbers.append(number)
    if not numbers:
        raise ValueError(f'{owner}: signals is empty; give at least one signal name, e.g. '
                         f'{DEFAULT_STOP_SIGNALS}')
    return tuple(numbers)


def _is_hook(hook_type: Any) -> bool:
    if isinstance(hook_type, type):
        return hook_type.__name__ == HOOK_TYPE
    return isinstance(hook_type, str) and hook_type.split('.')[-1] == HOOK_TYPE


def stop_signals_of_config(cfg: Any) -> Tuple[int, ...]:
    """The signals that stop a run of ``cfg`` (an mmengine ``Config`` or a dict): those of
    its ``PreemptionCheckpointHook`` in ``custom_hooks`` (of every such hook, in order), or
    none if it has no such hook."""
    numbers = []
    for hook in cfg.get('custom_hooks', None) or []:
        if isinstance(hook, dict) and _is_hook(hook.get('type')):
            owner = f"the config's {HOOK_TYPE}"
            for number in stop_signal_numbers(hook.get('signals', DEFAULT_STOP_SIGNALS), owner):
                if number not in numbers:
                    numbers.append(number)
    return tuple(numbers)
