#!/usr/bin/env python
"""Correctness of the attention paths on a GPU: the checks CPU CI cannot run.

    python tools/analysis/gpu_checks.py [--json OUT]
    python tools/analysis/gpu_checks.py --device cpu --quick   # the script itself, in CI

For every token layout and decay kind, SDPA, eager Flex and compiled Flex must agree with
the reference in fp32 (1e-4), bf16 inputs (3e-2) and fp32 inputs under fp16 autocast (the
mmdet / mmseg ``--amp`` default; 1e-2), forward and backward; then EVT-S under
``torch.compile`` (where ``attn_impl='auto'`` picks Flex) must match eager EVT-S (SDPA).
Prints one line per check and exits non-zero if any fails. Needs torch and mmengine only.
``--quick`` (Euclidean decay only, no compiled paths or backbone) on the CPU
is how the test suite keeps this script runnable between GPU sessions.
"""
import argparse
import json
import sys
from typing import Dict, List, Optional

import torch

from mmevt.models import EVT
from mmevt.ops import (ATTN_PATHS, DECAY_KINDS, LAYOUTS, decay_log_rates, impl_unavailable,
                       spatial_decay_attention)

# precision -> (input dtype, autocast dtype or None, tolerance of the max relative error)
PRECISIONS = {
    'fp32': (torch.float32, None, 1e-4),
    'bf16': (torch.bfloat16, None, 3e-2),
    'fp16-autocast': (torch.float32, torch.float16, 1e-2),
}


def max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-6)).item()


def check_paths(device: torch.device, quick: bool = False) -> List[Dict]:
    """Every path against the fp32 reference, output and input gradients.

    Every fast path that can run here with a backward pass (:data:`~mmevt.ops.ATTN_PATHS`)
    runs every layout x decay x precision; compiled Flex (each combination is a compile of
    its own) runs every layout with the Euclidean decay. ``quick``: Euclidean only, eager.
    """
    results = []
    hw, heads, d = (23, 37), 4, 32  # 851 tokens: every mode pads
    lg = decay_log_rates(heads, 2, 4).to(device)
    compiled = torch.compile(spatial_decay_attention)
    fast = [name for name in ATTN_PATHS if name != 'reference'
            and impl_unavailable(name, device, needs_grad=True) is None]
    for mode in LAYOUTS:
        for decay in (('euclidean', ) if quick else DECAY_KINDS):
            impls = fast + (['flex-compiled'] if 'flex' in fast and decay == 'euclidean'
                            and not quick else [])
            torch.manual_seed(0)
            base = [torch.randn(2, hw[0] * hw[1], heads, d, device=device) for _ in range(3)]
            q, k, v = (t.clone().requires_grad_() for t in base)
            ref = spatial_decay_attention(q, k, v, hw, lg, decay, mode, 64,
                                          attn_impl='reference')
            ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
            for precision, (dtype, autocast, tol) in PRECISIONS.items():
                for impl in impls:
                    fn = compiled if impl == 'flex-compiled' else spatial_decay_attention
                    q, k, v = (t.to(dtype).requires_grad_() for t in base)
                    with torch.autocast(device.type, autocast or torch.float32,
                                        enabled=autocast is not None):
                        out = fn(q, k, v, hw, lg, decay, mode, 64,
                                 attn_impl=impl.split('-')[0])
                    grads = torch.autograd.grad(out.float().square().sum(), (q, k, v))
                    err = max(max_rel_err(out, ref),
                              *(max_rel_err(g, r) for g, r in zip(grads, ref_grads)))
                    results.append(dict(check='paths', mode=mode, decay=decay, impl=impl,
                                        precision=precision, max_rel_err=err, ok=err < tol))
    return results


def check_compiled_backbone(device: torch.device) -> List[Dict]:
    """EVT-S compiled (auto -> Flex on CUDA) equals EVT-S eager (SDPA), forward + backward.

    The loss projects the outputs on fixed random maps: a mean or mean square of the
    LayerNorm-ed outputs is nearly constant and would compare gradients that are noise.
    """
    torch.manual_seed(0)
    model = EVT('evt-s', drop_path_rate=0.).to(device)
    x = torch.randn(2, 3, 225, 337, device=device)  # odd size: padded groups everywhere
    probes = [torch.randn(o.shape, device=device) for o in model(x)]
    params = list(model.parameters())

    def run(fn):
        outs = fn(x)
        return outs, torch.autograd.grad(sum((o * r).sum() for o, r in zip(outs, probes)),
                                         params)

    eager, g_eager = run(model)
    comp, g_comp = run(torch.compile(model))
    out_err = max(max_rel_err(a, b) for a, b in zip(comp, eager))
    grad_err = max_rel_err(torch.cat([g.flatten() for g in g_comp]),
                           torch.cat([g.flatten() for g in g_eager]))
    return [dict(check='compiled evt-s vs eager', out_err=out_err, grad_err=grad_err,
                 ok=out_err < 1e-3 and grad_err < 1e-2)]


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--json', help='write the results here')
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--quick', action='store_true',
                        help='Euclidean decay only, eager paths, EVT-test (for CPU CI)')
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        sys.exit('gpu_checks.py: no CUDA device here (--device cpu runs the checks on the CPU)')
    # one compile per (mode, dtype): past dynamo's default limit it would silently run eager
    torch._dynamo.config.cache_size_limit = 64
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'
    print(f'device: {name}; torch {torch.__version__}')
    results = check_paths(device, args.quick)
    if not args.quick:
        results += check_compiled_backbone(device)
    for r in results:
        print(('PASS ' if r['ok'] else 'FAIL ') + json.dumps(r), flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    failed = sum(not r['ok'] for r in results)
    print(f'{len(results) - failed} passed, {failed} failed')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
