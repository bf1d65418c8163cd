#!/usr/bin/env python
"""Correctness of the attention paths on a GPU: the checks CPU CI cannot run.

    python tools/analysis/gpu_checks.py [--part paths compiled backbone] [--jsonl OUT]
    python tools/analysis/gpu_checks.py --device cpu --quick   # the script itself, in CI

Three parts, each a step of the GPU session: ``paths``: for every token layout and decay
kind, SDPA and eager Flex must agree with the reference in fp32 (1e-4), bf16 inputs (3e-2)
and fp32 inputs under fp16 autocast (the mmdet / mmseg ``--amp`` default; 1e-2), forward
and backward; ``compiled``: compiled Flex, every layout with EVT's Euclidean decay and the
full layout with RMT's Manhattan decay, in the same precisions; ``backbone``: EVT-S under
``torch.compile`` (where ``attn_impl='auto'`` picks Flex) must match eager EVT-S (SDPA).
Prints one line per check as it is measured (and appends it to ``--jsonl``); exits
non-zero if any fails. Needs torch and mmengine only. ``--quick`` (Euclidean decay only)
on the CPU is how the test suite keeps this script runnable between GPU sessions.
"""
import argparse
import json
import sys
from typing import Dict, Iterator, List, Optional

import torch

from mmevt.analysis.records import append_row, device_name
from mmevt.models import EVT
from mmevt.ops import (ATTN_PATHS, DECAY_KINDS, LAYOUTS, decay_log_rates, impl_unavailable,
                       spatial_decay_attention)

# precision -> (input dtype, autocast dtype or None, tolerance of the max relative error)
PRECISIONS = {
    'fp32': (torch.float32, None, 1e-4),
    'bf16': (torch.bfloat16, None, 3e-2),
    'fp16-autocast': (torch.float32, torch.float16, 1e-2),
}
PARTS = ('paths', 'compiled', 'backbone')
# compiled Flex: EVT's decay in every layout, RMT's Manhattan decay in its full attention;
# EVT's own layouts first (group_dilate stages, full last stage), so a step cut off at its
# limit has checked those
COMPILED_CASES = [('group', 'euclidean'), ('dilate', 'euclidean'), ('full', 'euclidean'),
                  ('full', 'manhattan')] + [(mode, 'euclidean') for mode in LAYOUTS
                                            if mode not in ('group', 'dilate', 'full')]


def max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-6)).item()


def _compare(fn, impl: str, base, ref, ref_grads, case: Dict, device: torch.device,
             needs_grad: bool) -> Iterator[Dict]:
    """One row per precision: ``fn`` (attention with ``attn_impl=impl``) against the fp32
    reference output (and input gradients when ``needs_grad``)."""
    for precision, (dtype, autocast, tol) in PRECISIONS.items():
        q, k, v = (t.detach().to(dtype).requires_grad_(needs_grad) for t in base)
        with torch.autocast(device.type, autocast or torch.float32,
                            enabled=autocast is not None):
            out = fn(q, k, v, attn_impl=impl)
        errs = [max_rel_err(out, ref)]
        if needs_grad:
            grads = torch.autograd.grad(out.float().square().sum(), (q, k, v))
            errs += [max_rel_err(g, r) for g, r in zip(grads, ref_grads)]
        yield dict(case, precision=precision, backward=needs_grad, max_rel_err=max(errs),
                   ok=max(errs) < tol)


def _attention_case(mode: str, decay: str, device: torch.device):
    """Inputs, the attention call and the fp32 reference (output, input grads) of a case."""
    hw, heads, d = (23, 37), 4, 32  # 851 tokens: every mode pads
    lg = decay_log_rates(heads, 2, 4).to(device)
    torch.manual_seed(0)
    base = [torch.randn(2, hw[0] * hw[1], heads, d, device=device) for _ in range(3)]

    def attend(q, k, v, attn_impl, fn=spatial_decay_attention):
        return fn(q, k, v, hw, lg, decay, mode, 64, attn_impl=attn_impl)

    q, k, v = (t.clone().requires_grad_() for t in base)
    ref = attend(q, k, v, 'reference')
    return base, attend, ref.detach(), torch.autograd.grad(ref.square().sum(), (q, k, v))


def check_paths(device: torch.device, quick: bool = False) -> Iterator[Dict]:
    """Every eager fast path that can run here (:data:`~mmevt.ops.ATTN_PATHS`) against the
    fp32 reference, every layout x decay x precision, output and input gradients (where
    the path has a backward on this device). ``quick``: Euclidean only."""
    fast = [name for name in ATTN_PATHS
            if name != 'reference' and impl_unavailable(name, device) is None]
    for mode in LAYOUTS:
        for decay in (('euclidean', ) if quick else DECAY_KINDS):
            base, attend, ref, ref_grads = _attention_case(mode, decay, device)
            for impl in fast:
                needs_grad = impl_unavailable(impl, device, needs_grad=True) is None
                yield from _compare(attend, impl, base, ref, ref_grads,
                                    dict(check='paths', mode=mode, decay=decay, impl=impl),
                                    device, needs_grad)


def check_compiled_flex(device: torch.device, backend: str = 'inductor') -> Iterator[Dict]:
    """Compiled Flex against the reference for :data:`COMPILED_CASES` (each a compile of its
    own), every precision; backward where Flex has one on this device."""
    if impl_unavailable('flex', device) is not None:
        return
    needs_grad = impl_unavailable('flex', device, needs_grad=True) is None
    compiled = torch.compile(spatial_decay_attention, backend=backend)
    for mode, decay in COMPILED_CASES:
        base, attend, ref, ref_grads = _attention_case(mode, decay, device)
        fn = (lambda q, k, v, attn_impl, attend=attend: attend(q, k, v, attn_impl, compiled))
        yield from _compare(fn, 'flex', base, ref, ref_grads,
                            dict(check='compiled', mode=mode, decay=decay, impl='flex-compiled'),
                            device, needs_grad)


def check_compiled_backbone(device: torch.device, backend: str = 'inductor',
                            arch: str = 'evt-s') -> List[Dict]:
    """EVT-S compiled (auto -> Flex on CUDA) equals EVT-S eager (SDPA), forward + backward.

    The loss projects the outputs on fixed random maps: a mean or mean square of the
    LayerNorm-ed outputs is nearly constant and would compare gradients that are noise.
    """
    torch.manual_seed(0)
    model = EVT(arch, drop_path_rate=0.).to(device)
    x = torch.randn(2, 3, 225, 337, device=device)  # odd size: padded groups everywhere
    probes = [torch.randn(o.shape, device=device) for o in model(x)]
    params = list(model.parameters())

    def run(fn):
        outs = fn(x)
        return outs, torch.autograd.grad(sum((o * r).sum() for o, r in zip(outs, probes)),
                                         params)

    eager, g_eager = run(model)
    comp, g_comp = run(torch.compile(model, backend=backend))
    out_err = max(max_rel_err(a, b) for a, b in zip(comp, eager))
    grad_err = max_rel_err(torch.cat([g.flatten() for g in g_comp]),
                           torch.cat([g.flatten() for g in g_eager]))
    return [dict(check=f'compiled {arch} vs eager', out_err=out_err, grad_err=grad_err,
                 ok=out_err < 1e-3 and grad_err < 1e-2)]


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--part', nargs='+', choices=PARTS, default=list(PARTS),
                        help='which checks (default: all)')
    parser.add_argument('--jsonl', help='append each result to this JSON-lines file')
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--compile-backend', default='inductor',
                        help="torch.compile's backend (default: inductor)")
    parser.add_argument('--arch', default='evt-s', help='the backbone part compiles this')
    parser.add_argument('--quick', action='store_true',
                        help='paths only, Euclidean decay only (for CPU CI)')
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        sys.exit('gpu_checks.py: no CUDA device here (--device cpu runs the checks on the CPU)')
    # one compile per (mode, dtype): past dynamo's default limit it would silently run eager
    torch._dynamo.config.cache_size_limit = 64
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f'device: {device_name(device)}; torch {torch.__version__}')
    parts = {'paths': lambda: check_paths(device, args.quick),
             'compiled': lambda: check_compiled_flex(device, args.compile_backend),
             'backbone': lambda: check_compiled_backbone(device, args.compile_backend,
                                                         args.arch)}
    failed = total = 0
    for part in (['paths'] if args.quick else args.part):
        for r in parts[part]():
            print(('PASS ' if r['ok'] else 'FAIL ') + json.dumps(r), flush=True)
            append_row(args.jsonl, r, step=f'checks-{part}')
            failed, total = failed + (not r['ok']), total + 1
    print(f'{total - failed} passed, {failed} failed')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
