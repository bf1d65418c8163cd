"""CPU latency of an exported graph in onnxruntime against PyTorch on the same input.

One timer, :func:`time_against_onnxruntime`, and what each tool times with it:

- :func:`time_tensor_mode` (``mmevt-onnx --benchmark``): a file of torch's exporter against
  the model's ``tensor`` mode (PyTorch eager) on a random batch;
- :func:`time_predict` (``mmevt-deploy --benchmark``): mmdeploy's file against the
  toolkit's ``predict`` (model and post-processing) on a preprocessed image.
"""
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence

import torch
from torch import nn

from .onnx_export import TensorMode
from .parity import Reference, run_onnx


def time_against_onnxruntime(onnx_file: str,
                             make_runs: Callable[[object], Dict[str, Callable[[], object]]],
                             rounds: int, warmup: int, threads: Optional[int] = None
                             ) -> Dict[str, float]:
    """Median latency of an onnxruntime session and of a PyTorch callable, same threads.

    The two alternate run by run, so that load from other processes on a shared machine
    falls on both alike.

    Args:
        onnx_file (str): the ONNX file.
        make_runs (Callable): ``make_runs(session)`` (the onnxruntime session, made here
            with the threads) returns ``{'torch_ms': fn, 'ort_ms': fn}``: each ``fn()`` runs
            PyTorch, respectively onnxruntime, once.
        rounds (int): timed runs of each, after ``warmup`` untimed ones.
        warmup (int): untimed runs of each.
        threads (int, optional): intra-op threads of both. Defaults to torch's current
            setting.

    Returns:
        dict: ``ort_ms``, ``torch_ms`` (medians) and ``threads``.
    """
    import onnxruntime as ort
    before = torch.get_num_threads()
    threads = threads or before
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(onnx_file, opts, providers=['CPUExecutionProvider'])
    runs = make_runs(session)
    times: Dict[str, List[float]] = {k: [] for k in runs}
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            for i in range(warmup + rounds):
                for key, fn in runs.items():
                    t0 = time.perf_counter()
                    fn()
                    if i >= warmup:
                        times[key].append((time.perf_counter() - t0) * 1e3)
    finally:
        torch.set_num_threads(before)  # the caller's setting, not ours
    return dict({k: statistics.median(v) for k, v in times.items()}, threads=threads)


def time_tensor_mode(onnx_file: str, model: nn.Module, kind: str, shape: Sequence[int],
                     rounds: int = 20, batch: int = 1, threads: Optional[int] = None
                     ) -> Dict[str, float]:
    """Median CPU latency of onnxruntime and of PyTorch eager (the model's ``tensor``
    mode) on a random batch.

    Args:
        onnx_file (str): from :func:`~mmevt.deploy.onnx_export.export_onnx`.
        model (nn.Module): the exported model.
        kind (str): its kind.
        shape (Sequence[int]): ``(H, W)``.
        rounds (int): timed runs of each (after 3 warm-up runs). Defaults to 20.
        batch (int): batch size. Defaults to 1.
        threads (int, optional): intra-op threads of both. Defaults to torch's current
            setting.

    Returns:
        dict: ``ort_ms``, ``torch_ms`` (medians) and ``threads``.
    """
    wrapper = TensorMode(model, kind).eval()
    x = torch.randn(batch, 3, *shape)

    def make_runs(session) -> Dict[str, Callable]:
        feeds = {session.get_inputs()[0].name: x.numpy()}
        return {'torch_ms': lambda: wrapper(x), 'ort_ms': lambda: session.run(None, feeds)}

    return time_against_onnxruntime(onnx_file, make_runs, rounds, 3, threads)


def time_predict(onnx_file: str, ref: Reference, rounds: int = 10,
                 threads: Optional[int] = None) -> Dict[str, float]:
    """Median CPU latency of onnxruntime and of the toolkit's ``predict`` on the same
    batch.

    PyTorch's time is :meth:`~mmevt.deploy.parity.Reference.predict` (model and
    post-processing, no data pipeline), onnxruntime's the graph.

    Args:
        onnx_file (str): from :func:`~mmevt.deploy.mmdeploy_export.export_mmdeploy`.
        ref (Reference): the PyTorch model and its preprocessed batch.
        rounds (int): timed runs of each (after 2 warm-up runs). Defaults to 10.
        threads (int, optional): intra-op threads of both. Defaults to torch's current
            setting.

    Returns:
        dict: ``ort_ms``, ``torch_ms`` (medians) and ``threads``.
    """

    def make_runs(session) -> Dict[str, Callable]:
        return {'torch_ms': ref.predict, 'ort_ms': lambda: run_onnx(session, ref.inputs)}

    return time_against_onnxruntime(onnx_file, make_runs, rounds, 2, threads)
