"""Small helpers for values that are one item or several."""
from typing import Any, List


def as_list(value: Any) -> List[Any]:
    """One item or several as a list: a list / tuple as its items, anything else (a config
    key holding one head, a model returning one tensor) as ``[value]``."""
    return list(value) if isinstance(value, (list, tuple)) else [value]
