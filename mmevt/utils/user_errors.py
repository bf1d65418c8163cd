"""How mmevt's commands end on a user error: one line naming the command, exit status 1."""
import sys
from typing import Callable, List, Optional

# What a bad argument, a missing input or an output that would be overwritten raises.
USER_ERRORS = (ValueError, FileExistsError, FileNotFoundError)


def exit_on_user_error(main: Callable[[Optional[List[str]]], object], prog: str,
                       argv: Optional[List[str]] = None) -> None:
    """Run ``main(argv)``; a user error (:data:`USER_ERRORS`) ends the process with
    ``<prog>: error: <message>`` and exit status 1, without a traceback."""
    try:
        main(argv)
    except USER_ERRORS as err:
        sys.exit(f'{prog}: error: {err}')
