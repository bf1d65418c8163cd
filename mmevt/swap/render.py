"""The text of DST: a :class:`~mmevt.swap.plan.SwapPlan` written as a config inheriting SRC.

DST overrides only what changes, with a comment per override: ``custom_imports``, the
backbone (``_delete_=True``), the input channels of the modules that read the backbone, and
the recipe's top-level keys.
"""
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .config_source import comment_lines, deep_update, format_value, nest_override

if TYPE_CHECKING:  # the plan imports this module to write DST
    from .plan import SwapPlan


def render(plan: 'SwapPlan', src_cfg, command: str, base: Optional[str] = None) -> str:
    """The text of DST.

    Args:
        plan (SwapPlan): what DST says.
        src_cfg (mmengine.Config): SRC's config (the lists an override changes one
            element of are written whole from it).
        command (str): the command that wrote DST, for its header.
        base (str, optional): DST's ``_base_``. Defaults to ``plan.src``.

    Returns:
        str: the config source, ending in a newline.
    """
    lines = comment_lines(f'{plan.src} with an {plan.arch} (EVT) backbone instead of '
                          f'{plan.outputs.type}.')
    lines += comment_lines(f'Written by: {command}')
    lines += comment_lines(f'{plan.outputs.type} outputs (channels@stride, measured): '
                           f'{plan.outputs.describe()}.')
    lines += comment_lines(f'Recipe: {plan.recipe_note}.')
    for note in plan.notes:
        lines += comment_lines(f'Note: {note}.')
    lines += [f'_base_ = {base or plan.src!r}',
              "# the toolkit's own tools/train.py imports mmevt, which registers EVT",
              "custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)",
              '']
    lines.append('model = dict(')
    bb = {k: v for k, (v, _) in plan.backbone.items()}
    why = [f'{k}: {w}' for k, (_, w) in plan.backbone.items() if w]
    lines += comment_lines(f'{plan.outputs.type} -> EVT {plan.arch}; ' + '; '.join(why), 4)
    lines.append('    backbone=' + format_value(bb, 4, 13) + ',')
    merged: Dict[str, Tuple[Any, List[str]]] = {}
    for o in plan.overrides:
        if not o.path:
            for k, v in o.values.items():
                merged[k] = (v, [o.why])
            continue
        key = o.path[0]
        key, value = nest_override(o.path, o.values, src_cfg.model,
                                   merged.get(key, (None, ))[0])
        if key in merged and isinstance(value, list):
            merged[key][1].append(o.why)  # the same list, changed in place
        elif key in merged and isinstance(value, dict) and isinstance(merged[key][0], dict):
            old, whys = merged[key]
            deep_update(old, value)
            whys.append(o.why)
        else:
            merged[key] = (value, [o.why])
    for key, (value, whys) in merged.items():
        for w in whys:
            lines += comment_lines(f'{key}: {w}', 4)
        lines.append(f'    {key}=' + format_value(value, 4, 5 + len(key)) + ',')
    lines.append(')')
    for key, value, w in plan.top_level:
        lines += [''] + comment_lines(w) + [f'{key} = ' + format_value(value, 0, len(key) + 3)]
    return '\n'.join(lines) + '\n'
