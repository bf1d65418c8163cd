"""Config values as the swap reads them: plain containers, and one-or-many as a list."""
from typing import Any, List


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


def as_list(value: Any) -> List[Any]:
    """A config key that takes one item or several (a head or a list of heads, an
    ``in_index`` or a list of them) as a list of its items.

    Args:
        value (Any): a list / tuple, or one item.

    Returns:
        list: the items, or ``[value]``.
    """
    return list(value) if isinstance(value, (list, tuple)) else [value]
