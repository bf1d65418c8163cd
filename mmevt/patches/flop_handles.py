"""FLOP handles for the ops of EVT that the jit-tracing FLOP counters skip.

mmengine's ``FlopAnalyzer`` (behind ``get_model_complexity_info`` and so behind mmdet's,
mmseg's and mmpretrain's ``get_flops.py``) and fvcore's ``FlopCountAnalysis`` (the RMT
authors' counter) count an op only if their handle table has it. Neither has
``aten::scaled_dot_product_attention``, the op EVT's default (fused) attention path and
RMT's decomposed attention run, so they log "Unsupported operator" and count it as zero:
about 4% of EVT-S at 224 and more at detection sizes. :func:`register_flop_handles` (called
by ``import mmevt``) adds a handle that counts the op as the explicit reference path is
counted by the same tools: the ``q k^T`` and ``A v`` multiply-adds, one FLOP per
multiply-add, as their ``aten::matmul`` handle.

Softmax, the scale and the bias addition stay uncounted, as both tools leave elementwise
ops of every model uncounted. This is the only op of ours the counters skip: the other
"unsupported" ops they log on EVT / RMT backbones and their detectors / segmentors are
elementwise (``add``, ``mul``, ``gelu``, ``softmax``, ...), as for any CNN.
"""
import importlib
import logging
import warnings
from math import prod
from typing import Any, Callable, Dict, List, MutableMapping, Optional

logger = logging.getLogger('mmevt')

SDPA_OP = 'aten::scaled_dot_product_attention'


def _shape(value: Any) -> Optional[List[int]]:
    """Sizes of a traced jit value, None when the trace did not record them."""
    return value.type().sizes() if value.isCompleteTensor() else None


def sdpa_flop_jit(inputs: List[Any], outputs: List[Any]) -> int:
    """Multiply-adds of ``scaled_dot_product_attention(q, k, v, ...)``.

    ``q k^T`` costs ``L * S * E`` and ``A v`` costs ``L * S * Ev`` per batch entry and head,
    exactly what the counters' matmul handle gives the reference path
    ``softmax(q @ k.T * scale + bias) @ v``: ``prod(q.shape[:-1]) * S * (E + Ev)``.

    Args:
        inputs (list): the jit node's inputs; the first three are ``q`` of shape
            ``(..., L, E)``, ``k`` of shape ``(..., S, E)`` and ``v`` of shape
            ``(..., S, Ev)``.
        outputs (list): the jit node's outputs (unused).

    Returns:
        int: the multiply-adds.
    """
    q, k, v = (_shape(x) for x in inputs[:3])
    assert None not in (q, k, v), 'the trace recorded no shapes for attention inputs'
    return prod(q[:-1]) * k[-2] * (q[-1] + v[-1])


sdpa_flop_jit.__mmevt_handle__ = True  # marks our handles (survives a module reload)

HANDLES: Dict[str, Callable[[List[Any], List[Any]], int]] = {SDPA_OP: sdpa_flop_jit}

# (counter, module holding its default handle table, the table's name)
COUNTERS = (('mmengine', 'mmengine.analysis.complexity_analysis', '_DEFAULT_SUPPORTED_FLOP_OPS'),
            ('fvcore', 'fvcore.nn.flop_count', '_DEFAULT_SUPPORTED_OPS'))


def _add_handles(table: MutableMapping[str, Callable]) -> Dict[str, str]:
    """Put :data:`HANDLES` into one counter's table, keeping handles of others."""
    result = {}
    for op, handle in HANDLES.items():
        existing = table.get(op)
        if existing is not None and not getattr(existing, '__mmevt_handle__', False):
            result[op] = 'kept'  # the counter (or another package) counts the op already
            continue
        table[op] = handle
        result[op] = 'added' if existing is None else 'ours'
    return result


def register_flop_handles() -> Dict[str, Dict[str, str]]:
    """Register :data:`HANDLES` with mmengine's and (when installed) fvcore's counters.

    Each counter reads its default table whenever an analyzer is created, so every later
    ``get_model_complexity_info`` / ``FlopCountAnalysis`` (and every toolkit's
    ``get_flops.py``) counts the ops. Idempotent. A handle that someone else registered for
    the same op is kept as it is (``'kept'``, logged at INFO on the ``mmevt`` logger): a
    counter that learned the op itself, or a user's own choice, wins over ours.

    Returns:
        dict: per installed counter, per op, ``'added'`` (new), ``'ours'`` (registered
        before: replaced by the current function) or ``'kept'`` (another handle exists).
    """
    status = {}
    for counter, module, table in COUNTERS:
        try:
            with warnings.catch_warnings():  # fvcore's import warns about torch.jit.script
                warnings.filterwarnings('ignore', '.*torch.jit.script', FutureWarning)
                handles = getattr(importlib.import_module(module), table)
        except ImportError:  # fvcore is optional
            continue
        status[counter] = _add_handles(handles)
        for op, what in status[counter].items():
            if what == 'kept':
                logger.info(f'{counter} already has a FLOP handle for {op}: kept it '
                            f'({handles[op]!r}), mmevt did not register its own')
    return status
