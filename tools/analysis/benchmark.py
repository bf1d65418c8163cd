#!/usr/bin/env python
"""Side-by-side speed and memory of EVT, our RMT and Swin, on whatever device is present.

    python tools/analysis/benchmark.py                       # throughput at 224, batch 64
    python tools/analysis/benchmark.py --latency             # batch-1 latency (the CPU case)
    python tools/analysis/benchmark.py --train 800 1344      # backbone train step, batch 2
    python tools/analysis/benchmark.py --scaling 224 512 1024  # time/memory vs input size

Needs only torch (+ mmengine for mmevt itself); Swin comes from mmpretrain when installed,
else from timm, else it is left out with a note. fp32 runs with TF32 off (as the EVT
paper's A100 table); ``--dtype bf16`` runs under autocast. Prints a table and writes JSON.
Numbers are what this run measured on this machine: they are printed with the device name.
"""
import argparse
import json
import platform
import time
from contextlib import nullcontext
from typing import Callable, Dict, List, Optional

import torch
from torch import nn

DEFAULT_ARCHS = ['evt-t', 'evt-s', 'evt-b', 'evt-l', 'rmt-t', 'rmt-s', 'rmt-b', 'rmt-l',
                 'swin-t', 'swin-s', 'swin-b']


def build(arch: str, attn_impl: str) -> Optional[nn.Module]:
    """A backbone by name; ``swin-*`` from mmpretrain or timm, None when neither exists."""
    if not arch.startswith('swin-'):
        from mmevt.models import EVT
        return EVT(arch, attn_impl=attn_impl)
    size = {'swin-t': 'tiny', 'swin-s': 'small', 'swin-b': 'base'}[arch]
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


def device_name(device: torch.device) -> str:
    if device.type == 'cuda':
        return torch.cuda.get_device_name(device)
    return f'CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)'


def timed(fn: Callable[[], None], device: torch.device, warmup: int, iters: int) -> float:
    """Seconds per call of ``fn`` after ``warmup`` calls."""
    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - start) / iters


def measure(model: nn.Module, device: torch.device, shape, dtype: str, train: bool,
            compile_: bool, warmup: int, iters: int) -> Dict[str, float]:
    model = model.to(device)
    model.train(train)  # some backbones' train() returns None
    run = torch.compile(model) if compile_ else model
    x = torch.randn(shape, device=device)
    amp = (torch.autocast(device.type, dtype=torch.bfloat16) if dtype == 'bf16'
           else nullcontext())

    def step():
        with amp:
            out = run(x)
        if train:
            sum(o.float().mean() for o in out).backward()

    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
    with (nullcontext() if train else torch.no_grad()):
        sec = timed(step, device, warmup, iters)
    result = dict(seconds=sec, images_per_s=shape[0] / sec)
    if device.type == 'cuda':
        result['peak_mem_mb'] = torch.cuda.max_memory_allocated(device) / 2**20
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--arch', nargs='+', default=DEFAULT_ARCHS)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--dtype', nargs='+', default=['fp32', 'bf16'], choices=['fp32', 'bf16'])
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--latency', action='store_true', help='batch 1 instead of --batch')
    parser.add_argument('--train', type=int, nargs=2, metavar=('H', 'W'),
                        help='train step (forward + backward) of the backbone, batch 2')
    parser.add_argument('--scaling', type=int, nargs='+', metavar='SIZE',
                        help='inference at these square sizes, batch 1')
    parser.add_argument('--compile', action='store_true', help='also under torch.compile')
    parser.add_argument('--attn-impl', default='auto')
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--iters', type=int, default=10)
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
    print('| arch | case | dtype | compiled | ms / batch | images/s | peak MB |')
    print('|---|---|---|---|---|---|---|')
    rows: List[dict] = []
    for arch in args.arch:
        model = build(arch, args.attn_impl)
        if model is None:
            print(f'| {arch} | - | - | - | (no mmpretrain or timm: skipped) | | |')
            continue
        for case, shape, train in cases:
            for dtype in args.dtype:
                for comp in ([False, True] if args.compile else [False]):
                    r = measure(model, device, shape, dtype, train, comp, args.warmup,
                                args.iters)
                    rows.append(dict(arch=arch, case=case, dtype=dtype, compiled=comp, **r))
                    peak = f"{r['peak_mem_mb']:.0f}" if 'peak_mem_mb' in r else '-'
                    print(f"| {arch} | {case} | {dtype} | {comp} | {1e3 * r['seconds']:.1f} | "
                          f"{r['images_per_s']:.1f} | {peak} |", flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(device=device_name(device), torch=torch.__version__, rows=rows), f,
                      indent=1)


if __name__ == '__main__':
    main()
