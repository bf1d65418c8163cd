"""Argument checks, renamed-argument aliases and the switch for the costly input checks.

The input checks (non-finite values in the backbone's input) cost a host sync per call, so
they are off unless ``MMEVT_DEBUG`` is set when mmevt is imported, or switched on with
:func:`set_input_checks`. The environment is read once, here, not on every forward.
"""
import os
import warnings
from typing import Any, Mapping, Optional, Tuple


def check_choice(name: str, value: str, allowed: Tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise a ``ValueError`` naming both."""
    if value not in allowed:
        raise ValueError(f'{name} must be one of {list(allowed)}, got {value!r}')
    return value


def check_heads(embed_dims: int, num_heads: int) -> int:
    """Return the head dim, or raise a ``ValueError`` if ``num_heads`` does not divide C."""
    if num_heads <= 0 or embed_dims % num_heads:
        raise ValueError(f'num_heads ({num_heads}) must be positive and divide '
                         f'embed_dims ({embed_dims})')
    return embed_dims // num_heads


def check_positive_int(name: str, value: Any) -> int:
    """Return ``value`` if it is a positive int (not a bool), else raise a ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f'{name} must be a positive int, got {value!r}')
    return value


def renamed_argument(owner: str, old: str, new: str, old_value: Any, new_value: Any) -> Any:
    """The value of an argument renamed from ``old`` to ``new`` (``old`` kept one release).

    Passing ``old`` warns (``FutureWarning``, shown to users by default); passing both is a
    ``ValueError``.

    Returns:
        The value given under either name (``new_value`` when ``old`` was not given).
    """
    if old_value is None:
        return new_value
    if new_value is not None:
        raise ValueError(f'{owner}: pass {new}= only ({old}= is its deprecated name), '
                         f'got both {old}={old_value!r} and {new}={new_value!r}')
    warnings.warn(f'{owner}: {old}= is deprecated and will be removed in the next release; '
                  f'use {new}=', FutureWarning, stacklevel=3)
    return old_value


def debug_from_env(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether ``MMEVT_DEBUG`` asks for the input checks (set and not ``''`` or ``'0'``)."""
    environ = os.environ if environ is None else environ
    return environ.get('MMEVT_DEBUG', '0') not in ('', '0')


_INPUT_CHECKS = debug_from_env()


def input_checks_enabled() -> bool:
    """Whether the costly input checks run (initially: ``MMEVT_DEBUG`` at import)."""
    return _INPUT_CHECKS


def set_input_checks(enabled: bool) -> bool:
    """Switch the costly input checks (NaN/Inf in the backbone's input) on or off.

    Returns:
        bool: the previous setting, to restore it.
    """
    global _INPUT_CHECKS
    previous, _INPUT_CHECKS = _INPUT_CHECKS, bool(enabled)
    return previous


__all__ = ['check_choice', 'check_heads', 'check_positive_int', 'renamed_argument',
           'debug_from_env', 'input_checks_enabled', 'set_input_checks']
