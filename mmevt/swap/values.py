"""Config values as the swap reads them: plain containers (one-or-many as a list is
:func:`mmevt.utils.lists.as_list`)."""
from typing import Any


def to_plain(value: Any) -> Any:
    """``ConfigDict`` / nested containers -> plain dicts and lists (tuples kept).

    Args:
        value (Any): a config value (a ``ConfigDict``, list, tuple or a leaf).

    Returns:
        Any: the same value made of plain ``dict`` / ``list`` / ``tuple`` (leaves shared).
    """
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_plain(v) for v in value)
    return value
