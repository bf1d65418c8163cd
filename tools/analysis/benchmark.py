#!/usr/bin/env python
"""Side-by-side speed and memory of EVT, our RMT and Swin, on whatever device is present.

    python tools/analysis/benchmark.py                       # throughput at 224, batch 64
    python tools/analysis/benchmark.py --latency             # batch-1 latency (the CPU case)
    python tools/analysis/benchmark.py --train 800 1344      # backbone train step, batch 2
    python tools/analysis/benchmark.py --scaling 224 512 1024  # time/memory vs input size
    python tools/analysis/benchmark.py --config configs/cls/ablation/*.py --complexity
        # the backbones of configs (token-mixer ablations), with params and FLOPs
    python tools/analysis/benchmark.py --arch evt-s rmt-s --profile 10  # dominant kernels
    python tools/analysis/benchmark.py --arch evt-s --attn-impl sdpa flex --compile both
        # EVT's attention paths side by side (the evidence for attn_impl='auto')

Needs only torch (+ mmengine for mmevt itself); Swin comes from mmpretrain when installed,
else from timm (built for each case's input size), else it is left out with a note; each
row says where its model came from. ``--config`` reads ``model.backbone`` of
OpenMMLab configs (their toolkit must be installed to resolve ``toolkit::`` bases). fp32
runs with TF32 off (as the EVT paper's A100 table); ``--dtype bf16`` runs under autocast.
Times are medians over ``--iters`` calls (and over ``--rounds`` interleaved rounds). Prints
a table and writes JSON (``--jsonl``: each row appended as soon as it is measured, for
runs that may be cut off). Numbers are what this run measured on this machine: they are
printed with the device name.
"""
import argparse
import ctypes
import gc
import json
import os.path as osp
import statistics
import time
from contextlib import nullcontext
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from mmevt.analysis.records import append_row, device_name
from mmevt.models.backbones.archs import ARCH_FAMILIES

SWIN_SIZES = {'swin-t': 'tiny', 'swin-s': 'small', 'swin-b': 'base'}  # Swin itself
# EVT against its baseline RMT (the arch table's families) and Swin
DEFAULT_ARCHS = [*ARCH_FAMILIES['evt'], *ARCH_FAMILIES['rmt'], *SWIN_SIZES]


def build(arch: str, attn_impl: str,
          img_size: Tuple[int, int] = (224, 224)) -> Tuple[Optional[nn.Module], str]:
    """A backbone by name and where it came from: EVT / RMT from mmevt, ``swin-*`` from
    mmpretrain or else timm (None when neither exists). timm's Swin is built for
    ``img_size`` (H, W): by default it refuses any other input size."""
    if arch not in SWIN_SIZES:
        from mmevt.models import EVT
        return EVT(arch, attn_impl=attn_impl), 'mmevt'
    size = SWIN_SIZES[arch]
    try:
        from mmpretrain.models import SwinTransformer
        return SwinTransformer(arch=size, out_indices=(0, 1, 2, 3)), 'mmpretrain'
    except ImportError:
        pass
    try:
        import timm
        model = timm.create_model(f'swin_{size}_patch4_window7_224', features_only=True,
                                  img_size=tuple(img_size))
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


def timed(fn: Callable[[], None], device: torch.device, warmup: int, iters: int) -> float:
    """Median seconds per call of ``fn`` over ``iters`` calls after ``warmup`` calls.

    The median, not the mean: on a shared CPU one slow call (another process, a page
    fault) would otherwise move a whole row.
    """
    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
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


def _proc_status_kb(key: str) -> int:
    with open('/proc/self/status') as f:
        return int(next(line.split()[1] for line in f if line.startswith(key + ':')))


def cpu_peak_tracker() -> Optional[Callable[[], float]]:
    """Start tracking the process's peak resident memory; return a reader of its growth.

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


def measure(model: nn.Module, device: torch.device, shape, dtype: str, train: bool,
            compile_: bool, warmup: int, iters: int,
            profile: int = 0, backend: str = 'inductor') -> Dict[str, float]:
    """Time one case; the model is on ``device`` only meanwhile, so the peak memory is
    this model's alone (CUDA: allocated memory incl. weights; CPU: growth of the resident
    set during the case). ``profile > 0`` prints the ``profile`` costliest kernels;
    ``backend`` is ``torch.compile``'s."""
    model = model.to(device)
    model.train(train)  # some backbones' train() returns None
    run = torch.compile(model, backend=backend) if compile_ else model
    x = torch.randn(shape, device=device)
    amp = (torch.autocast(device.type, dtype=torch.bfloat16) if dtype == 'bf16'
           else nullcontext())

    def step():
        with amp:
            out = run(x)
        if train:
            sum(o.float().mean() for o in out).backward()

    peak_growth = None
    if device.type == 'cuda':
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    else:
        peak_growth = cpu_peak_tracker()
    with (nullcontext() if train else torch.no_grad()):
        sec = timed(step, device, warmup, iters)
        if profile:
            print_profile(step, device, profile)
    result = dict(seconds=sec, images_per_s=shape[0] / sec)
    if device.type == 'cuda':
        result['peak_mem_mb'] = torch.cuda.max_memory_allocated(device) / 2**20
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


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--arch', nargs='+', default=None,
                        help=f'archs to run (default: {" ".join(DEFAULT_ARCHS)}, or none '
                             'when --config is given)')
    parser.add_argument('--config', nargs='+', default=[],
                        help="also run the backbones of these configs ('model.backbone')")
    parser.add_argument('--complexity', action='store_true',
                        help='add params and multiply-adds per image (meta device, exact)')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--dtype', nargs='+', default=['fp32', 'bf16'], choices=['fp32', 'bf16'])
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--latency', action='store_true', help='batch 1 instead of --batch')
    parser.add_argument('--train', type=int, nargs=2, metavar=('H', 'W'),
                        help='train step (forward + backward) of the backbone, batch 2')
    parser.add_argument('--scaling', type=int, nargs='+', metavar='SIZE',
                        help='inference at these square sizes, batch 1')
    parser.add_argument('--compile', nargs='?', const='both', default='no',
                        choices=['no', 'both', 'only'],
                        help='also (both) or only (only) under torch.compile')
    parser.add_argument('--compile-backend', default='inductor',
                        help="torch.compile's backend (default: inductor; 'aot_eager' traces "
                             'and runs without code generation, to check a setup quickly)')
    parser.add_argument('--attn-impl', nargs='+', default=['auto'],
                        help="EVT's attention paths, each a row of its own (default: auto)")
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--iters', type=int, default=10)
    parser.add_argument('--rounds', type=int, default=1,
                        help='interleaved rounds over all models; the median is reported')
    parser.add_argument('--profile', type=int, default=0, metavar='TOP',
                        help='print the TOP costliest ops of one step of each case')
    parser.add_argument('--json', help='write the results here')
    parser.add_argument('--jsonl', help='append each row to this JSON-lines file as soon as '
                        'it is measured')
    parser.add_argument('--tag', default='', help="a label put in each --jsonl row ('step')")
    return parser.parse_args(argv)


def input_cases(args: argparse.Namespace) -> List[Tuple[str, Tuple[int, ...], bool]]:
    """``(case name, input shape (B, 3, H, W), train)`` of each case the arguments ask for."""
    if args.train:
        return [('train', (2, 3, *args.train), True)]
    if args.scaling:
        return [(f'{s}x{s}', (1, 3, s, s), False) for s in args.scaling]
    b = 1 if args.latency else args.batch
    return [(f'b{b}@{args.size}', (b, 3, args.size, args.size), False)]


class Variant(NamedTuple):
    """One model to measure in each case: a name, EVT's attention path, its origin."""
    name: str
    attn_impl: str  # '-' for models without EVT attention
    source: str
    model_for: Callable[[Tuple[int, ...]], nn.Module]  # input shape -> the model


def build_models(args: argparse.Namespace) -> List[Variant]:
    """A :class:`Variant` per ``--arch`` (per ``--attn-impl`` for EVT / RMT) and
    ``--config``; prints a table row for a Swin that neither mmpretrain nor timm can build.
    Models are built once, except timm's Swin, once per input size."""
    archs = args.arch if args.arch is not None else ([] if args.config else DEFAULT_ARCHS)
    variants = []
    for arch in archs:
        for impl in (['-'] if arch in SWIN_SIZES else args.attn_impl):
            model, source = build(arch, impl if impl != '-' else 'auto')
            if model is None:
                print(f'| {arch} | - | - | - | (no mmpretrain or timm: skipped) | | |')
                break
            # timm's Swin is built per input size (the one above is 224 x 224's)
            sizes = {(224, 224): model}

            def model_for(shape, arch=arch, sizes=sizes, per_size=source.startswith('timm')):
                hw = tuple(shape[2:]) if per_size else (224, 224)
                if hw not in sizes:
                    sizes[hw] = build(arch, 'auto', hw)[0]
                return sizes[hw]
            variants.append(Variant(arch, impl, source, model_for))
    for c in args.config:
        model = build_from_config(c)
        variants.append(Variant(osp.splitext(osp.basename(c))[0], 'config', 'config',
                                lambda shape, model=model: model))
    return variants


def print_header(with_complexity: bool) -> None:
    extra = ' params (M) | GMACs / image |' if with_complexity else ''
    print(f'| model | case | dtype | compiled | ms / batch | images/s | peak MB |{extra}')
    print('|---|---|---|---|---|---|---|' + '---|---|' * with_complexity)


def summarise(job: Job, runs: List[Dict[str, float]], cost: Dict[str, float]) -> dict:
    """The row of a job over its rounds: median time, the largest peak, its complexity."""
    sec = statistics.median(r['seconds'] for r in runs)
    r = dict(seconds=sec, images_per_s=job.shape[0] / sec)
    if 'peak_mem_mb' in runs[0]:
        r['peak_mem_mb'] = max(x['peak_mem_mb'] for x in runs)
    return dict(arch=job.name, case=job.case, shape=list(job.shape), dtype=job.dtype,
                compiled=job.compiled, attn_impl=job.attn_impl, source=job.source, **r,
                **cost)


def print_row(row: dict) -> None:
    peak = f"{row['peak_mem_mb']:.0f}" if 'peak_mem_mb' in row else '-'
    cols = f" {row['params_m']:.2f} | {row['gmacs']:.2f} |" if 'params_m' in row else ''
    # the path is named only when asked for: plain rows keep the arch alone
    name = (row['arch'] if row['attn_impl'] in ('auto', '-', 'config')
            else f"{row['arch']} ({row['attn_impl']})")
    print(f"| {name} | {row['case']} | {row['dtype']} | {row['compiled']} | "
          f"{1e3 * row['seconds']:.1f} | {row['images_per_s']:.1f} | {peak} |{cols}",
          flush=True)


def run_jobs(jobs: List[Job], device: torch.device, args: argparse.Namespace,
             done: Callable[[Job, List[Dict[str, float]]], None]) -> None:
    """Measure every job ``args.rounds`` times; ``done(job, runs)`` as soon as a job's runs
    are complete (at once with one round, after the last round otherwise).

    Rounds interleave the models, so slow drift of a shared machine hits all rows alike.
    """
    runs: List[List[Dict[str, float]]] = [[] for _ in jobs]
    for rnd in range(args.rounds):
        for job, job_runs in zip(jobs, runs):
            if args.profile and rnd == 0:
                print(f'profile: {job.name} {job.case} {job.dtype} compiled={job.compiled}',
                      flush=True)
            job_runs.append(measure(job.model, device, job.shape, job.dtype, job.train,
                                    job.compiled, args.warmup, args.iters,
                                    args.profile if rnd == 0 else 0, args.compile_backend))
            if args.rounds == 1:
                done(job, job_runs)
    if args.rounds > 1:
        for job, job_runs in zip(jobs, runs):
            done(job, job_runs)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cases = input_cases(args)
    print(f'device: {device_name(device)}; torch {torch.__version__}')
    print_header(args.complexity)
    variants = build_models(args)
    compiled = {'no': [False], 'both': [False, True], 'only': [True]}[args.compile]
    jobs = [Job(v.name, v.model_for(shape), case, shape, train, dtype, comp, v.attn_impl,
                v.source)
            for v in variants for case, shape, train in cases
            for dtype in args.dtype for comp in compiled]
    costs = {(v.name, case): complexity(v.model_for(shape), shape) if args.complexity else {}
             for v in variants for case, shape, _ in cases}
    rows: List[dict] = []

    def done(job: Job, runs: List[Dict[str, float]]) -> None:
        rows.append(summarise(job, runs, costs[(job.name, job.case)]))
        print_row(rows[-1])
        append_row(args.jsonl, rows[-1], step=args.tag)

    run_jobs(jobs, device, args, done)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(device=device_name(device), torch=torch.__version__, rows=rows), f,
                      indent=1)

if __name__ == '__main__':
    main()
