"""Training memory as counts that do not depend on the device, and the CPU peak tracker.

:func:`saved_tensor_bytes` counts what autograd keeps from the forward pass for the
backward pass (a ``torch.autograd.graph.saved_tensors_hooks`` hook, each storage counted
once): the activations that decide training memory, the same on any device for a given
model, input and dtype. :func:`cpu_peak_tracker` is the benchmark's measured CPU peak.
"""
import ctypes
import gc
from contextlib import nullcontext
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import torch
from torch import Tensor, nn

MIB = 2**20


class SavedBytes(NamedTuple):
    """What one training forward pass saves for its backward pass.

    Attributes:
        total (int): bytes of every distinct storage saved (parameters excluded).
        per_image (float): ``total / batch``.
        tensors (int): saved tensors seen (before deduplication).
        storages (int): distinct storages among them.
        largest (list[tuple[tuple[int, ...], str, int]]): the largest storages as
            ``(shape, dtype, bytes)`` of a tensor that saved them, largest first (ten).
    """
    total: int
    per_image: float
    tensors: int
    storages: int
    largest: list


def _storage_key(t: Tensor):
    storage = t.untyped_storage()
    return (t.device.type, t.device.index, storage.data_ptr()), storage.nbytes()


def saved_tensor_bytes(model: nn.Module, x: Tensor, dtype: str = 'fp32') -> SavedBytes:
    """Bytes a training forward pass of ``model`` on ``x`` saves for backward.

    Every tensor autograd saves passes a pack hook; the storages behind them are counted
    once each (views, a cached table saved by every block, and tensors saved by two ops
    share one), and the model's own parameters and buffers are left out (they are
    resident anyway and do not grow with the batch). The model runs in training mode; no
    backward pass is run. With ``with_cp`` (non-reentrant checkpointing), what the
    checkpointed blocks keep is their inputs: their inner saves are packed by the
    checkpoint's own hooks, which hold no tensors, so they are not counted, as they take
    no memory until the backward pass recomputes them block by block.

    Args:
        model (nn.Module): put in training mode for the pass (and left so).
        x (Tensor): the input, shape ``(B, C, H, W)``; ``per_image`` divides by B.
        dtype (str): ``'fp32'`` or ``'bf16'`` (autocast on ``x``'s device).

    Returns:
        SavedBytes: the counts.
    """
    if dtype not in ('fp32', 'bf16'):
        raise ValueError(f"dtype must be 'fp32' or 'bf16', got {dtype!r}")
    resident = {_storage_key(t)[0] for t in (*model.parameters(), *model.buffers())}
    seen: Dict[tuple, int] = {}
    shapes: Dict[tuple, tuple] = {}
    count = [0]

    def pack(t: Tensor) -> Tensor:
        count[0] += 1
        key, nbytes = _storage_key(t)
        if key not in resident and key not in seen:
            seen[key] = nbytes
            shapes[key] = (tuple(t.shape), str(t.dtype).replace('torch.', ''), nbytes)
        # detached (the same storage): an output saved by its own node, packed as itself,
        # would hold its node in a cycle Python's collector cannot see, and the pass's
        # whole graph would outlive it
        return t.detach()

    model.train()
    amp = (torch.autocast(x.device.type, dtype=torch.bfloat16) if dtype == 'bf16'
           else nullcontext())
    with torch.enable_grad(), amp, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    del out  # the graph (and the saved tensors) go with the outputs
    total = sum(seen.values())
    largest = sorted(shapes.values(), key=lambda s: -s[2])[:10]
    return SavedBytes(total, total / x.shape[0], count[0], len(seen), largest)


def saved_bytes_split(model: nn.Module, hw: Tuple[int, int], dtype: str = 'fp32',
                      device: Optional[torch.device] = None,
                      in_channels: int = 3) -> Dict[str, float]:
    """Saved-for-backward bytes of ``model`` at ``hw`` at batch 1 and batch 2.

    Two passes of :func:`saved_tensor_bytes`. Their difference is what one more image
    adds; where it is less than the batch-2 bytes per image, the step saves tables shared
    by the batch (EVT's decay bias of a stage attending in one group; autocast's copies
    of the weights). It can also be more: a layout change that is a view at batch 1 and a
    copy at batch 2 (RMT's row / column attention) saves a tensor only from batch 2 on.

    Args:
        model (nn.Module): the model (training mode).
        hw (tuple[int, int]): the input ``(H, W)``.
        dtype (str): ``'fp32'`` or ``'bf16'``. Defaults to ``'fp32'``.
        device (torch.device, optional): where to run. Defaults to None (the CPU).
        in_channels (int): input channels. Defaults to 3.

    Returns:
        dict: bytes ``batch1``, ``batch2``, ``per_image`` (``batch2 / 2``) and
        ``marginal`` (``batch2 - batch1``).
    """
    one, two = (saved_tensor_bytes(model, torch.randn(b, in_channels, *hw, device=device),
                                   dtype).total for b in (1, 2))
    return dict(batch1=one, batch2=two, per_image=two / 2, marginal=two - one)


def _proc_status_kb(key: str) -> int:
    with open('/proc/self/status') as f:
        return int(next(line.split()[1] for line in f if line.startswith(key + ':')))


def cpu_peak_tracker() -> Optional[Callable[[], float]]:
    """Start tracking the process's peak resident memory; return a reader of its growth
    (MiB).

    Linux only (``/proc/self/clear_refs`` resets the peak to the current size); None where
    that is not available. The growth is what the case allocated on top of what was already
    resident (the model's weights were), so CPU and CUDA peaks are not comparable.
    """
    gc.collect()
    try:  # hand freed heap pages back, so reusing them counts as growth again
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        start = _proc_status_kb('VmRSS')
    except (OSError, StopIteration):
        return None
    return lambda: (_proc_status_kb('VmHWM') - start) / 1024


__all__ = ['MIB', 'SavedBytes', 'cpu_peak_tracker', 'saved_bytes_split', 'saved_tensor_bytes']
