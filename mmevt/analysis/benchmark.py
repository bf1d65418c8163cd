"""Speed and memory of backbones side by side: the library behind
``tools/analysis/benchmark.py``.

Models by name (EVT / RMT from mmevt, Swin from mmpretrain or else timm) or from configs,
timed cases eager or under ``torch.compile`` (with the compile time and the graphs it
made), the process's peak memory, the saved-for-backward bytes per image
(:mod:`.memory`), a measured matmul peak of the device (the yardstick of a run) and what
each record says of its run (date, commit, CPU, threads). The tables made from the rows
are :mod:`.benchmark_tables`.
"""
import statistics
import time
from contextlib import nullcontext
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from ..models.backbones.archs import ARCH_FAMILIES
from .memory import MIB, cpu_peak_tracker, saved_bytes_split
from .records import cpu_model, machine

SWIN_SIZES = {'swin-t': 'tiny', 'swin-s': 'small', 'swin-b': 'base'}  # Swin itself
# EVT against its baseline RMT (the arch table's families) and Swin
DEFAULT_ARCHS = [*ARCH_FAMILIES['evt'], *ARCH_FAMILIES['rmt'], *SWIN_SIZES]
DTYPES = ('fp32', 'bf16')


def build_backbone(arch: str, attn_impl: str = 'auto', img_size: Tuple[int, int] = (224, 224),
                   with_cp: bool = False) -> Tuple[Optional[nn.Module], str]:
    """A backbone by name and where it came from: EVT / RMT from mmevt, ``swin-*`` from
    mmpretrain or else timm (None when neither exists).

    Args:
        arch (str): an mmevt arch name, optionally with ``layer_cfgs`` after a colon
            (``'evt-t:recompute=False'``), or a key of :data:`SWIN_SIZES`.
        attn_impl (str): EVT's attention path. Defaults to ``'auto'``.
        img_size (tuple[int, int]): ``(H, W)``; timm's Swin is built for it (by default it
            refuses any other input size). Defaults to ``(224, 224)``.
        with_cp (bool): gradient checkpointing per block (mmevt's and mmpretrain's
            backbones; timm's Swin through ``set_grad_checkpointing``). Defaults to False.

    Returns:
        tuple[nn.Module | None, str]: the model and its source (``'mmevt'``,
        ``'mmpretrain'``, ``'timm <version>'`` or ``'none'``).
    """
    if arch not in SWIN_SIZES:
        import ast

        from mmevt.models import EVT
        arch, _, options = arch.partition(':')  # 'evt-t:recompute=False': layer_cfgs
        layer_cfgs = {k: ast.literal_eval(v) for k, v in
                      (o.split('=', 1) for o in options.split(',') if o)}
        return EVT(arch, attn_impl=attn_impl, with_cp=with_cp,
                   layer_cfgs=layer_cfgs or None), 'mmevt'
    size = SWIN_SIZES[arch]
    try:
        from mmpretrain.models import SwinTransformer
        return (SwinTransformer(arch=size, out_indices=(0, 1, 2, 3), with_cp=with_cp),
                'mmpretrain')
    except ImportError:
        pass
    try:
        import timm
        model = timm.create_model(f'swin_{size}_patch4_window7_224', features_only=True,
                                  img_size=tuple(img_size))
        if with_cp:
            model.set_grad_checkpointing(True)
        return model, f'timm {timm.__version__}'
    except (ImportError, RuntimeError):
        return None, 'none'


def build_from_config(path: str) -> nn.Module:
    """The backbone ``model.backbone`` of an OpenMMLab config (weights not loaded)."""
    from mmevt.toolkits import build_model, load_config

    # init_cfg dropped: speed does not depend on weights, and checkpoints may be absent
    return build_model(load_config(path), part='backbone', drop_init_cfg=True, name=path)


def complexity(model: nn.Module, shape: Sequence[int]) -> Dict[str, float]:
    """Params (M) and multiply-adds per image (G) of ``model`` at ``shape``'s size
    (``(B, 3, H, W)``; counted for one image)."""
    from mmevt.analysis import GIGA, MEGA, count_macs, count_params
    return dict(params_m=count_params(model) / MEGA,
                gmacs=count_macs(model, (1, ) + tuple(shape[1:])) / GIGA)


def _sync(device: torch.device) -> Callable[[], None]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == 'cuda' else (lambda: None)


def timed(fn: Callable[[], None], device: torch.device, warmup: int, iters: int) -> float:
    """Median seconds per call of ``fn`` over ``iters`` calls after ``warmup`` calls.

    The median, not the mean: on a shared CPU one slow call (another process, a page
    fault) would otherwise move a whole row.
    """
    sync = _sync(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(iters, 1)):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_peak(device: torch.device, dtype: str = 'fp32', n: Optional[int] = None,
                iters: int = 5) -> Dict[str, float]:
    """The device's measured dense matmul rate: the yardstick of a run's other rows.

    The median time of an ``n x n`` by ``n x n`` matmul (``2 n^3`` FLOPs) over ``iters``
    calls after one warm-up; fp32 with TF32 off as the benchmark's fp32 rows (the switch
    is restored), bf16 as plain bf16 tensors.

    Args:
        device (torch.device): where to measure.
        dtype (str): ``'fp32'`` or ``'bf16'``. Defaults to ``'fp32'``.
        n (int, optional): the matrix side. Defaults to None (2048 on CPU, 8192 on CUDA).
        iters (int): timed calls. Defaults to 5.

    Returns:
        dict: ``gflops_per_s``, ``n``, ``dtype`` and ``seconds`` (per call).
    """
    if dtype not in DTYPES:
        raise ValueError(f'dtype must be one of {list(DTYPES)}, got {dtype!r}')
    n = n or (8192 if device.type == 'cuda' else 2048)
    tdtype = torch.float32 if dtype == 'fp32' else torch.bfloat16
    a = torch.randn(n, n, device=device, dtype=tdtype)
    b = torch.randn(n, n, device=device, dtype=tdtype)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        sec = timed(lambda: torch.mm(a, b), device, 1, iters)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return dict(gflops_per_s=2 * n**3 / sec / 1e9, n=n, dtype=dtype, seconds=sec)


class GraphCounter:
    """A ``torch.compile`` backend that counts the graphs Dynamo hands it, then passes
    them on to a named backend (``'inductor'``, ``'aot_eager'``, ``'eager'``, ...).

    A model traced whole in one go gives one graph; each graph break adds one, and each
    recompile (a guard failed: new sizes, a new mode) adds the graphs of the new trace.
    """

    def __init__(self, backend: str = 'inductor'):
        from torch._dynamo import lookup_backend
        self.name = backend
        self.backend = lookup_backend(backend)
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs += 1
        return self.backend(gm, example_inputs)


def measure(model: nn.Module, device: torch.device, shape: Sequence[int], dtype: str,
            train: bool, compile_: bool, warmup: int, iters: int, profile: int = 0,
            backend: str = 'inductor', dynamic: Optional[bool] = None) -> Dict[str, float]:
    """Time one case of ``model`` (on ``device`` only meanwhile, so the peak memory is its
    own).

    Args:
        model (nn.Module): the model; returns a tensor or a tuple / list of them.
        device (torch.device): where to run.
        shape (Sequence[int]): the input ``(B, 3, H, W)``.
        dtype (str): ``'fp32'`` or ``'bf16'`` (autocast).
        train (bool): a training step (forward + backward of the outputs' means) in train
            mode, else an inference forward under ``no_grad``.
        compile_ (bool): under ``torch.compile(model, backend=backend, dynamic=dynamic)``.
        warmup (int): untimed calls first (with ``compile_``, the first call compiles and
            is timed on its own as ``compile_s``; at least that one call is made).
        iters (int): timed calls; the median is reported.
        profile (int): print this many costliest kernels of one step. Defaults to 0.
        backend (str): ``torch.compile``'s backend. Defaults to ``'inductor'``.
        dynamic (bool, optional): ``torch.compile``'s ``dynamic``. Defaults to None.

    Returns:
        dict: ``seconds`` (per call), ``images_per_s``, ``peak_mem_mb`` (CUDA: allocated
        memory incl. weights; CPU: growth of the resident set during the case, where
        Linux tells it), and with ``compile_`` ``compile_s`` (the first call, compile
        included) and ``graphs`` (what Dynamo traced: 1 is one whole graph).
    """
    model = model.to(device)
    model.train(train)  # some backbones' train() returns None
    counter = None
    if compile_:
        # Dynamo's cache is per code object: every EVT shares EVT.forward's, so a run of
        # many compiled models would reach the recompile limit and run the rest eager
        torch._dynamo.reset()
        counter = GraphCounter(backend)
    run = torch.compile(model, backend=counter, dynamic=dynamic) if compile_ else model
    x = torch.randn(tuple(shape), device=device)
    amp = (torch.autocast(device.type, dtype=torch.bfloat16) if dtype == 'bf16'
           else nullcontext())

    def step():
        with amp:
            out = run(x)
        if train:
            outs = [out] if isinstance(out, torch.Tensor) else out
            sum(o.float().mean() for o in outs).backward()

    peak_growth = None
    if device.type == 'cuda':
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    else:
        peak_growth = cpu_peak_tracker()
    result = {}
    with (nullcontext() if train else torch.no_grad()):
        if compile_:
            result['compile_s'] = timed(step, device, 0, 1)
            warmup = max(warmup - 1, 0)
        sec = timed(step, device, warmup, iters)
        if profile:
            print_profile(step, device, profile)
    result.update(seconds=sec, images_per_s=shape[0] / sec)
    if counter is not None:
        result['graphs'] = counter.graphs
    if device.type == 'cuda':
        result['peak_mem_mb'] = torch.cuda.max_memory_allocated(device) / MIB
    elif peak_growth is not None:
        result['peak_mem_mb'] = peak_growth()
    model.cpu()
    return result


def print_profile(step: Callable[[], None], device: torch.device, top: int) -> None:
    """Which kernels dominate one step: the ``top`` ops by self time on ``device``."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
    with profile(activities=acts) as prof:
        step()
        if device.type == 'cuda':
            torch.cuda.synchronize()
    key = 'self_cuda_time_total' if device.type == 'cuda' else 'self_cpu_time_total'
    print(prof.key_averages().table(sort_by=key, row_limit=top), flush=True)


def saved_per_image(model: nn.Module, device: torch.device, shape: Sequence[int],
                    dtype: str) -> Dict[str, float]:
    """Saved-for-backward MiB of a training forward pass of ``model`` at ``shape``'s size,
    on ``device``: at batch 1, and per image at batch 2
    (:func:`~mmevt.analysis.memory.saved_bytes_split`)."""
    model = model.to(device)
    try:
        split = saved_bytes_split(model, tuple(shape[2:]), dtype, device, shape[1])
    finally:
        model.cpu()
    return dict(saved_mib_batch1=split['batch1'] / MIB,
                saved_mib_per_image=split['per_image'] / MIB)


def run_fields(device: torch.device, repo: Optional[str] = None) -> Dict[str, object]:
    """What every record of a run says of it: the device (with the CPU's model and the
    threads torch uses), torch, the date, the commit measured and, on CPU, the CPU's model
    and thread count as fields of their own.

    Args:
        device (torch.device): where the run measures.
        repo (str, optional): the checkout whose commit is named. Defaults to None (the one
            mmevt is imported from).

    Returns:
        dict: ``device``, ``torch``, ``date`` (UTC, ISO 8601), ``commit`` (short hash,
        ``+dirty`` with uncommitted changes; ``'unknown'`` outside git), ``cpu``,
        ``threads``.
    """
    import datetime
    import os.path as osp
    import subprocess
    repo = repo or osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

    def git(*args: str) -> str:
        return subprocess.run(['git', '-C', repo, *args], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    try:
        commit = git('rev-parse', '--short', 'HEAD') or 'unknown'
        if commit != 'unknown' and git('status', '--porcelain', '--untracked-files=no'):
            commit += '+dirty'
    except (OSError, subprocess.SubprocessError):
        commit = 'unknown'
    date = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%MZ')
    return dict(machine(device), date=date, commit=commit, cpu=cpu_model(),
                threads=torch.get_num_threads())


class Job(NamedTuple):
    """One measured case: a model at an input shape, dtype and compile setting."""
    name: str
    model: nn.Module
    case: str
    shape: Tuple[int, ...]
    train: bool
    dtype: str
    compiled: bool
    attn_impl: str  # EVT's attention path ('-' for other models)
    source: str  # where the model came from
    with_cp: bool = False


class Variant(NamedTuple):
    """One model to measure in each case: a name, EVT's attention path, its origin."""
    name: str
    attn_impl: str  # '-' for models without EVT attention
    source: str
    model_for: Callable[[Tuple[int, ...]], nn.Module]  # input shape -> the model
    with_cp: bool = False


def input_cases(train: Optional[Sequence[Sequence[int]]] = None,
                scaling: Optional[Sequence[int]] = None, batch: int = 64, size: int = 224,
                latency: bool = False, train_batch: int = 2
                ) -> List[Tuple[str, Tuple[int, ...], bool]]:
    """``(case name, input shape (B, 3, H, W), train)`` of each case asked for.

    Args:
        train (Sequence[Sequence[int]], optional): training steps at these ``(H, W)``,
            batch ``train_batch``; one size is the case ``'train'``, several are
            ``'train@HxW'``. Defaults to None.
        scaling (Sequence[int], optional): inference at these square sizes, batch 1.
        batch, size, latency: the inference case otherwise (``latency``: batch 1); with
            ``train``, ``latency`` adds the batch-1 case to the steps (one run for both).
        train_batch (int): batch of the training steps. Defaults to 2.
    """
    b1 = [(f'b1@{size}', (1, 3, size, size), False)]
    if train:
        return [('train' if len(train) == 1 else f'train@{h}x{w}', (train_batch, 3, h, w),
                 True) for h, w in train] + (b1 if latency else [])
    if scaling:
        return [(f'{s}x{s}', (1, 3, s, s), False) for s in scaling]
    return b1 if latency else [(f'b{batch}@{size}', (batch, 3, size, size), False)]


def build_variants(archs: Sequence[str], attn_impls: Sequence[str] = ('auto', ),
                   configs: Sequence[str] = (), with_cp: Sequence[bool] = (False, ),
                   skipped: Callable[[str], None] = lambda arch: None) -> List[Variant]:
    """A :class:`Variant` per arch (per attention path and ``with_cp`` setting for EVT /
    RMT; ``with_cp`` for Swin too) and per config; ``skipped(arch)`` for a Swin that
    neither mmpretrain nor timm can build. Models are built once, except timm's Swin, once
    per input size."""
    import os.path as osp
    variants = []
    for arch in archs:
        for cp in with_cp:
            for impl in (['-'] if arch in SWIN_SIZES else attn_impls):
                model, source = build_backbone(arch, impl if impl != '-' else 'auto',
                                               with_cp=cp)
                if model is None:
                    skipped(arch)
                    break
                # timm's Swin is built per input size (the one above is 224 x 224's)
                sizes = {(224, 224): model}

                def model_for(shape, arch=arch, sizes=sizes, cp=cp,
                              per_size=source.startswith('timm')):
                    hw = tuple(shape[2:]) if per_size else (224, 224)
                    if hw not in sizes:
                        sizes[hw] = build_backbone(arch, 'auto', hw, cp)[0]
                    return sizes[hw]
                variants.append(Variant(arch, impl, source, model_for, cp))
    for c in configs:
        model = build_from_config(c)
        variants.append(Variant(osp.splitext(osp.basename(c))[0], 'config', 'config',
                                lambda shape, model=model: model))
    return variants


def summarise(job: Job, runs: List[Dict[str, float]], extra: Dict[str, float]) -> dict:
    """The row of a job over its rounds: median time, the largest peak, the first
    round's compile time and graphs, and ``extra`` (complexity, saved bytes)."""
    sec = statistics.median(r['seconds'] for r in runs)
    # each round's time too: ratios of two rows are read round by round (interleaved)
    r = dict(seconds=sec, images_per_s=job.shape[0] / sec,
             round_seconds=[x['seconds'] for x in runs])
    if 'peak_mem_mb' in runs[0]:
        r['peak_mem_mb'] = max(x['peak_mem_mb'] for x in runs)
    for key in ('compile_s', 'graphs'):
        if key in runs[0]:
            r[key] = runs[0][key]
    return dict(arch=job.name, case=job.case, shape=list(job.shape), dtype=job.dtype,
                compiled=job.compiled, attn_impl=job.attn_impl, source=job.source,
                **({'with_cp': True} if job.with_cp else {}), **r, **extra)


def run_jobs(jobs: List[Job], device: torch.device, done: Callable[[Job, List[Dict]], None],
             rounds: int = 1, warmup: int = 3, iters: int = 10, profile: int = 0,
             backend: str = 'inductor', dynamic: Optional[bool] = None) -> None:
    """Measure every job ``rounds`` times (:func:`measure`); ``done(job, runs)`` as soon as
    a job's runs are complete (at once with one round, after the last round otherwise).

    Rounds interleave the models, so slow drift of a shared machine hits all rows alike.
    A compiled job compiles in each round (a fresh ``torch.compile``), so every round
    times its own compile.
    """
    runs: List[List[Dict[str, float]]] = [[] for _ in jobs]
    for rnd in range(rounds):
        for job, job_runs in zip(jobs, runs):
            if profile and rnd == 0:
                print(f'profile: {job.name} {job.case} {job.dtype} compiled={job.compiled}',
                      flush=True)
            job_runs.append(measure(job.model, device, job.shape, job.dtype, job.train,
                                    job.compiled, warmup, iters, profile if rnd == 0 else 0,
                                    backend, dynamic))
            if rounds == 1:
                done(job, job_runs)
    if rounds > 1:
        for job, job_runs in zip(jobs, runs):
            done(job, job_runs)


__all__ = ['DEFAULT_ARCHS', 'SWIN_SIZES', 'GraphCounter', 'Job', 'Variant', 'build_backbone',
           'build_from_config', 'build_variants', 'complexity', 'input_cases', 'matmul_peak',
           'measure', 'print_profile', 'run_fields', 'run_jobs', 'saved_per_image',
           'summarise', 'timed']
