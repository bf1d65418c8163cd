#!/usr/bin/env python
"""Correctness of the attention paths on a GPU: the checks CPU CI cannot run.

    python tools/analysis/gpu_checks.py [--json OUT]

For every grouping mode and decay kind, SDPA, eager Flex and compiled Flex must agree with
the reference in fp32 (1e-4) and bf16 (3e-2), forward and backward; then EVT-S under
``torch.compile`` (where ``attn_impl='auto'`` picks Flex) must match eager EVT-S (SDPA).
Prints one line per check and exits non-zero if any fails. Needs torch and mmengine only.
"""
import argparse
import json
import sys
from typing import Dict, List

import torch

from mmevt.models import EVT
from mmevt.ops import (ATTN_PATHS, DECAY_KINDS, LAYOUTS, decay_log_rates,
                       spatial_decay_attention)

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}


def max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-6)).item()


def check_paths(device: torch.device) -> List[Dict]:
    """Every path against the fp32 reference, output and input gradients.

    Every fast path that can run here (:data:`~mmevt.ops.ATTN_PATHS`) runs every layout x
    decay; compiled Flex (each combination is a compile of its own) runs every layout with
    the Euclidean decay.
    """
    results = []
    hw, heads, d = (23, 37), 4, 32  # 851 tokens: every mode pads
    lg = decay_log_rates(heads, 2, 4).to(device)
    compiled = torch.compile(spatial_decay_attention)
    fast = [name for name, path in ATTN_PATHS.items()
            if name != 'reference' and path.missing() is None]
    for mode in LAYOUTS:
        for decay in DECAY_KINDS:
            impls = fast + (['flex-compiled'] if 'flex' in fast and decay == 'euclidean'
                            else [])
            torch.manual_seed(0)
            base = [torch.randn(2, hw[0] * hw[1], heads, d, device=device) for _ in range(3)]
            q, k, v = (t.clone().requires_grad_() for t in base)
            ref = spatial_decay_attention(q, k, v, hw, lg, decay, mode, 64,
                                          attn_impl='reference')
            ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
            for dtype in (torch.float32, torch.bfloat16):
                for impl in impls:
                    fn = compiled if impl == 'flex-compiled' else spatial_decay_attention
                    q, k, v = (t.to(dtype).requires_grad_() for t in base)
                    out = fn(q, k, v, hw, lg, decay, mode, 64, attn_impl=impl.split('-')[0])
                    grads = torch.autograd.grad(out.float().square().sum(), (q, k, v))
                    err = max(max_rel_err(out, ref),
                              *(max_rel_err(g, r) for g, r in zip(grads, ref_grads)))
                    results.append(dict(check='paths', mode=mode, decay=decay, impl=impl,
                                        dtype=str(dtype), max_rel_err=err,
                                        ok=err < TOLERANCE[dtype]))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--json', help='write the results here')
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit('gpu_checks.py needs a CUDA device')
    device = torch.device('cuda')
    # one compile per (mode, dtype): past dynamo's default limit it would silently run eager
    torch._dynamo.config.cache_size_limit = 64
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f'device: {torch.cuda.get_device_name(device)}; torch {torch.__version__}')
    results = check_paths(device) + check_compiled_backbone(device)
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
