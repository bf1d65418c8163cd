#!/usr/bin/env python
"""Side-by-side speed and memory of EVT, our RMT and Swin, on whatever device is present.

    python tools/analysis/benchmark.py                       # throughput at 224, batch 64
    python tools/analysis/benchmark.py --latency             # batch-1 latency (the CPU case)
    python tools/analysis/benchmark.py --train 800 1344      # backbone train step, batch 2
    python tools/analysis/benchmark.py --scaling 224 512 1024  # time/memory vs input size
    python tools/analysis/benchmark.py --config configs/cls/ablation/*.py --complexity
        # the backbones of configs (token-mixer ablations), with params and FLOPs
    python tools/analysis/benchmark.py --arch evt-s rmt-s --profile 10  # dominant kernels

Needs only torch (+ mmengine for mmevt itself); Swin comes from mmpretrain when installed,
else from timm, else it is left out with a note. ``--config`` reads ``model.backbone`` of
OpenMMLab configs (their toolkit must be installed to resolve ``toolkit::`` bases). fp32
runs with TF32 off (as the EVT paper's A100 table); ``--dtype bf16`` runs under autocast.
Times are medians over ``--iters`` calls (and over ``--rounds`` interleaved rounds). Prints
a table and writes JSON. Numbers are what this run measured on this machine: they are
printed with the device name.
"""
import argparse
import ctypes
import gc
import json
import os.path as osp
import platform
import statistics
import time
from contextlib import nullcontext
from typing import Callable, Dict, List, Optional

import torch
from torch import nn

from mmevt.models.backbones.archs import ARCH_FAMILIES

SWIN_SIZES = {'swin-t': 'tiny', 'swin-s': 'small', 'swin-b': 'base'}  # Swin itself
# EVT against its baseline RMT (the arch table's families) and Swin
DEFAULT_ARCHS = [*ARCH_FAMILIES['evt'], *ARCH_FAMILIES['rmt'], *SWIN_SIZES]


def build(arch: str, attn_impl: str) -> Optional[nn.Module]:
    """A backbone by name; ``swin-*`` from mmpretrain or timm, None when neither exists."""
    if arch not in SWIN_SIZES:
        from mmevt.models import EVT
        return EVT(arch, attn_impl=attn_impl)
    size = SWIN_SIZES[arch]
    try:
        from mmpretrain.models import SwinTransformer
        return SwinTransformer(arch=size, out_indices=(0, 1, 2, 3))
    except ImportError:
        pass
    try:
        import timm
        return timm.create_model(f'swin_{size}_patch4_window7_224', features_only=True)
    except (ImportError, RuntimeError):
        return None


def build_from_config(path: str) -> nn.Module:
    """The backbone ``model.backbone`` of an OpenMMLab config (weights not loaded)."""
    import mmevt  # noqa: F401  (registers EVT and the token mixers)
    from mmengine.config import Config
    from mmengine.registry import MODELS
    cfg = Config.fromfile(path).model.backbone
    cfg.pop('init_cfg', None)  # speed does not depend on weights; checkpoints may be absent
    return MODELS.build(cfg)


def complexity(model: nn.Module, shape) -> Dict[str, float]:
    """Params (M) and multiply-adds per image (G) of ``model`` at ``shape``'s size."""
    from mmevt.analysis import count_macs, count_params
    return dict(params_m=count_params(model) / 1e6,
                gmacs=count_macs(model, (1, ) + tuple(shape[1:])) / 1e9)


def device_name(device: torch.device) -> str:
    if device.type == 'cuda':
        return torch.cuda.get_device_name(device)
    return f'CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)'


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


def main() -> None:
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
    parser.add_argument('--attn-impl', default='auto')
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--iters', type=int, default=10)
    parser.add_argument('--rounds', type=int, default=1,
                        help='interleaved rounds over all models; the median is reported')
    parser.add_argument('--profile', type=int, default=0, metavar='TOP',
                        help='print the TOP costliest ops of one step of each case')
    parser.add_argument('--json', help='write the results here')
    args = parser.parse_args()

    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.train:
        cases = [('train', (2, 3, *args.train), True)]
    elif args.scaling:
        cases = [(f'{s}x{s}', (1, 3, s, s), False) for s in args.scaling]
    else:
        b = 1 if args.latency else args.batch
        cases = [(f'b{b}@{args.size}', (b, 3, args.size, args.size), False)]
    print(f'device: {device_name(device)}; torch {torch.__version__}')
    archs = args.arch if args.arch is not None else ([] if args.config else DEFAULT_ARCHS)
    models = [(a, lambda a=a: build(a, args.attn_impl)) for a in archs]
    models += [(osp.splitext(osp.basename(c))[0], lambda c=c: build_from_config(c))
               for c in args.config]
    extra = ' params (M) | GMACs / image |' if args.complexity else ''
    print(f'| model | case | dtype | compiled | ms / batch | images/s | peak MB |{extra}')
    print('|---|---|---|---|---|---|---|' + '---|---|' * args.complexity)
    built = []
    for name, make in models:
        model = make()
        if model is None:
            print(f'| {name} | - | - | - | (no mmpretrain or timm: skipped) | | |')
        else:
            built.append((name, model))
    jobs = [(name, model, case, shape, train, dtype, comp)
            for name, model in built for case, shape, train in cases
            for dtype in args.dtype
            for comp in {'no': [False], 'both': [False, True], 'only': [True]}[args.compile]]
    costs = {(name, case): complexity(model, shape) if args.complexity else {}
             for name, model in built for case, shape, _ in cases}
    rows: List[dict] = []

    def emit(job, runs: List[Dict[str, float]]) -> None:
        name, _, case, shape, _, dtype, comp = job
        sec = statistics.median(r['seconds'] for r in runs)
        r = dict(seconds=sec, images_per_s=shape[0] / sec)
        if 'peak_mem_mb' in runs[0]:
            r['peak_mem_mb'] = max(x['peak_mem_mb'] for x in runs)
        cost = costs[(name, case)]
        rows.append(dict(arch=name, case=case, dtype=dtype, compiled=comp, **r, **cost))
        peak = f"{r['peak_mem_mb']:.0f}" if 'peak_mem_mb' in r else '-'
        cols = f" {cost['params_m']:.2f} | {cost['gmacs']:.2f} |" if cost else ''
        print(f"| {name} | {case} | {dtype} | {comp} | {1e3 * sec:.1f} | "
              f"{r['images_per_s']:.1f} | {peak} |{cols}", flush=True)

    # Rounds interleave the models, so slow drift of a shared machine hits all rows alike.
    runs: List[List[Dict[str, float]]] = [[] for _ in jobs]
    for rnd in range(args.rounds):
        for job, done in zip(jobs, runs):
            name, model, case, shape, train, dtype, comp = job
            if args.profile and rnd == 0:
                print(f'profile: {name} {case} {dtype} compiled={comp}', flush=True)
            done.append(measure(model, device, shape, dtype, train, comp, args.warmup,
                                args.iters, args.profile if rnd == 0 else 0,
                                args.compile_backend))
            if args.rounds == 1:
                emit(job, done)
    if args.rounds > 1:
        for job, done in zip(jobs, runs):
            emit(job, done)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(device=device_name(device), torch=torch.__version__, rows=rows), f,
                      indent=1)


if __name__ == '__main__':
    main()
