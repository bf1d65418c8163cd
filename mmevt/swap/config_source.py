"""Writing Python config source: values, comments and overrides of a ``_base_`` config.

Nothing here knows about the swap: :func:`format_value` writes any config value as the
OpenMMLab configs are written (``dict(...)`` where the keys allow, wrapped at a width),
:func:`comment_lines` wraps a comment, and :func:`nest_override` / :func:`deep_update` turn
overrides at key paths into the values a config inheriting a base writes (mmengine merges
dicts into the base's, but replaces lists whole).
"""
import copy
import re
import textwrap
from typing import Any, Dict, List, Tuple

from ..toolkits.config_values import to_plain

_IDENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def format_value(value: Any, indent: int = 0, used: int = 0, width: int = 95) -> str:
    """Python source of ``value`` (dicts as ``dict(...)`` where keys allow), wrapped at
    ``width``.

    Args:
        value (Any): dicts, lists, tuples and ``repr``-able leaves.
        indent (int): the current line's indentation. Defaults to 0.
        used (int): the columns already taken on the current line. Defaults to 0.
        width (int): the widest line. Defaults to 95.

    Returns:
        str: the source, one line if it fits, else one item per line.
    """
    def inline(v: Any) -> str:
        if isinstance(v, dict):
            if all(isinstance(k, str) and _IDENT.match(k) for k in v):
                return 'dict(' + ', '.join(f'{k}={inline(x)}' for k, x in v.items()) + ')'
            return '{' + ', '.join(f'{k!r}: {inline(x)}' for k, x in v.items()) + '}'
        if isinstance(v, list):
            return '[' + ', '.join(inline(x) for x in v) + ']'
        if isinstance(v, tuple):
            return '(' + ', '.join(inline(x) for x in v) + (',)' if len(v) == 1 else ')')
        return repr(v)

    one = inline(value)
    if used + len(one) <= width or not isinstance(value, (dict, list)) or not value:
        return one
    pad = ' ' * (indent + 4)
    if isinstance(value, list):
        body = [pad + format_value(x, indent + 4, indent + 4, width) for x in value]
        opening, closing = '[', ']'
    elif all(isinstance(k, str) and _IDENT.match(k) for k in value):
        body = [f'{pad}{k}=' + format_value(x, indent + 4, indent + 5 + len(k), width)
                for k, x in value.items()]
        opening, closing = 'dict(', ')'
    else:
        body = [f'{pad}{k!r}: ' + format_value(x, indent + 4, indent + 6 + len(k), width)
                for k, x in value.items()]
        opening, closing = '{', '}'
    return opening + '\n' + ',\n'.join(body) + ',\n' + ' ' * indent + closing


def comment_lines(text: str, indent: int = 0, width: int = 95) -> List[str]:
    """``text`` as comment lines of at most ``width`` columns (long words stay whole).

    Args:
        text (str): the comment.
        indent (int): the lines' indentation. Defaults to 0.
        width (int): the widest line. Defaults to 95.

    Returns:
        list[str]: ``# ...`` lines, continuation lines indented two more columns.
    """
    pad = ' ' * indent + '# '
    return textwrap.wrap(text, width, initial_indent=pad, subsequent_indent=pad + '  ',
                         break_long_words=False, break_on_hyphens=False)


def nest_override(path: Tuple[Any, ...], values: Dict[str, Any], base: dict,
                  existing: Any = None) -> Tuple[str, Any]:
    """The top key under ``base`` and its value for an override of ``values`` at ``path``.

    A list element (heads given as a list) is written as the whole list with that element
    changed (into ``existing``, the list written so far, if any), since a config cannot
    override one element of a list.

    Args:
        path (tuple): keys from ``base``; an int indexes a list. Not empty.
        values (dict): the keys to set at ``path``.
        base (dict): the base config's dict the path starts in (e.g. its ``model``).
        existing (Any): the value already written for the top key. Defaults to None.

    Returns:
        tuple: the top key and the value to write for it.
    """
    if not path:
        raise AssertionError('overrides of the top level are merged by the caller')
    key, rest = path[0], path[1:]
    if rest and isinstance(rest[0], int):
        items = existing if isinstance(existing, list) else [
            copy.deepcopy(to_plain(x)) for x in base[key]]
        target = items[rest[0]]
        for p in rest[1:]:
            target = target[p]
        target.update(values)
        return key, items
    value: Any = dict(values)
    for p in reversed(rest):
        value = {p: value}
    return key, value


def deep_update(dst: dict, src: dict) -> None:
    """Merge ``src`` into ``dst`` in place, dicts key by key (as mmengine merges them)."""
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            deep_update(dst[k], v)
        else:
            dst[k] = v
