"""EVT under ``torch.compile``: one whole graph in training and eval mode, on every
attention path and with the options users turn on, and one dynamic graph for every input
size of multi-scale training.

Dynamo's cheap backends only (``eager``: the captured graph run as is; ``aot_eager``:
plus AOT autograd's forward / backward split): a graph break, a guard or a recompile is
Dynamo's, whatever the backend, and inductor's C++ code generation would cost minutes on
two cores. CI cost: 6.5 minutes measured on 2 cores shared with other work (383 s for
the backbone tests, 13 s for the grouping ones; a dynamic training trace is 1-2 minutes,
the others 20-40 s).
"""
import pytest
import torch
import torch._dynamo

from helpers import probe_loss
from mmevt.analysis.benchmark import GraphCounter
from mmevt.models import EVT
from mmevt.ops import flex_available

# multi-scale detection training sizes, scaled down for CPU: the 3x recipe resizes the
# short side to 480..800 in steps of 32 (long side <= 1333) and pads to multiples of 32,
# so every size is a multiple of 32 and the stage grids (1/4 .. 1/32) fill their groups
# in some stages and pad them in others (batch 2, as training: at batch 1 torch's CPU
# convolution picks its kernel by the input's element count, a guard of torch's own)
MULTI_SCALE = [(96, 160), (128, 192), (160, 224), (224, 160), (192, 288)]


def _compiled(model, backend: str, **kwargs):
    torch._dynamo.reset()  # a fresh cache: counts are this test's alone
    counter = GraphCounter(backend)
    return torch.compile(model, backend=counter, fullgraph=True, **kwargs), counter


def _traced_variants(model) -> int:
    """How many compiled variants of ``model.forward`` Dynamo keeps (1 + recompiles).

    Not the backend's call count: with ``dynamic=True`` Dynamo first traces Python floats
    (norm eps, momentum) as symbols, finds it cannot keep them and restarts the same trace
    with them constant, calling the backend twice for one graph it installs."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    return len(_debug_get_cache_entry_list(type(model).forward.__code__))


def _train_step(model, x):
    torch.manual_seed(0)  # drop path draws the same masks in both runs
    out = model(x)
    probe_loss(out).backward()
    return out


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_outputs_close(got, want, rtol=1e-4):
    for a, b in zip(got, want):
        # relative to the output's scale (LayerNorm'd maps: about 1)
        torch.testing.assert_close(a, b, atol=rtol * b.abs().max().item(), rtol=rtol)


# (attn_impl, options, modes): the options users turn on, on SDPA (the CPU / eager
# path); Flex has no backward on CPU, so it is checked in eval mode
CASES = [
    pytest.param('sdpa', dict(with_cp=True, drop_path_rate=0.2, frozen_stages=1,
                              layer_scales=1e-6), ('train', 'eval'), id='sdpa-options'),
    pytest.param('reference', dict(), ('train', ), id='reference'),
    pytest.param('flex', dict(), ('eval', ), id='flex', marks=pytest.mark.skipif(
        not flex_available(), reason='this torch has no FlexAttention')),
]


@pytest.mark.parametrize('impl,options,modes', CASES)
def test_the_backbone_compiles_as_one_graph_in_train_and_eval_mode(impl, options, modes):
    torch.manual_seed(0)
    model = EVT('evt-test', attn_impl=impl, **options)
    x = torch.randn(2, 3, 96, 128)
    if 'train' in modes:
        model.train()
        want = _train_step(model, x)
        want_grads = _grads(model)
        model.zero_grad(set_to_none=True)
        compiled, counter = _compiled(model, 'aot_eager')
        got = _train_step(compiled, x)
        assert counter.graphs == 1  # fullgraph: a break would have raised
        _assert_outputs_close(got, want)
        got_grads = _grads(model)
        assert set(got_grads) == set(want_grads) and want_grads
        if options.get('frozen_stages'):  # frozen: no gradient, compiled or not
            assert not any(n.startswith(('stem.', 'stages.0.')) for n in got_grads)
        for name, g in want_grads.items():
            torch.testing.assert_close(got_grads[name], g, rtol=1e-3,
                                       atol=1e-3 * g.abs().max().item(), msg=name)
    if 'eval' in modes:
        model.eval()
        compiled, counter = _compiled(model, 'eager')
        with torch.no_grad():
            want = model(x)
            got = compiled(x)
        assert counter.graphs == 1
        _assert_outputs_close(got, want)


@pytest.mark.parametrize('arch,mixers', [
    ('evt-test', None),  # EVT's 1D groups (padded in some stages, not in others)
    ('rmt-test', ['decomposed', 'window_grid', 'decomposed', 'full']),  # rotary, 2D windows
])
def test_multi_scale_sizes_share_one_dynamic_graph_in_training(arch, mixers):
    torch.manual_seed(0)
    model = EVT(arch, mixers=mixers, group_sizes=16).train()
    compiled, counter = _compiled(model, 'aot_eager', dynamic=True)
    first = True
    for hw in MULTI_SCALE:
        x = torch.randn(2, 3, *hw)
        # after the first trace any recompile is an error (the bound: one graph)
        with torch._dynamo.config.patch(error_on_recompile=not first):
            got = _train_step(compiled, x)
        first = False
        assert [o.shape[-2:] for o in got] == [
            ((hw[0] - 1) // s + 1, (hw[1] - 1) // s + 1) for s in (4, 8, 16, 32)]
    assert _traced_variants(model) == 1 and counter.graphs in (1, 2)  # 2: a restart
    with torch.no_grad():  # the dynamic graph computes what eager does at the last size
        model.eval()
        compiled_eval, _ = _compiled(model, 'eager', dynamic=True)
        _assert_outputs_close(compiled_eval(x), model(x))


def test_automatic_dynamic_shapes_trace_at_most_twice():
    # torch.compile's default (dynamic=None, what mmengine's compile=True passes): the
    # first size is traced static, the second size once more as dynamic, then no more.
    # Batch 2: at batch 1 torch's CPU convolution picks its kernel by the input's size
    # (3 x H x W above or below 20480 elements), a guard of torch's own on small inputs
    model = EVT('evt-test').eval()
    compiled, counter = _compiled(model, 'eager')
    with torch.no_grad():
        for i, hw in enumerate(MULTI_SCALE):
            with torch._dynamo.config.patch(error_on_recompile=i >= 2):
                compiled(torch.randn(2, 3, *hw))
    assert counter.graphs == _traced_variants(model) == 2


def test_explain_finds_no_graph_break_in_any_family():
    # torch._dynamo.explain: the graphs and breaks of one call, for each family's layout
    torch._dynamo.reset()
    for arch in ('evt-test', 'rmt-test'):
        explanation = torch._dynamo.explain(EVT(arch).eval())(torch.randn(1, 3, 96, 128))
        assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), arch


def test_each_decay_table_is_built_once_per_stage_and_forward():
    # the stage builds its tables once per forward pass and passes them to its blocks, in
    # the graph too: one Euclidean distance table (one sqrt) per stage, although stage 2
    # has two blocks of one layout; one dynamic graph for both sizes
    sqrts = []

    def backend(gm, example_inputs):
        sqrts.append(sum(n.target in (torch.sqrt, 'sqrt') for n in gm.graph.nodes))
        return gm.forward
    model = EVT('evt-test', mixers=['group'] * 3 + ['full']).eval()
    assert [len(s.blocks) for s in model.stages] == [1, 1, 2, 1]
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=True)
    with torch.no_grad():
        for i, hw in enumerate([(96, 160), (128, 192)]):
            with torch._dynamo.config.patch(error_on_recompile=i > 0):
                compiled(torch.randn(2, 3, *hw))
    assert sqrts[-1] == 4 and _traced_variants(model) == 1


@pytest.mark.parametrize('mode', ['group', 'dilate', 'window', 'grid'])
def test_grouping_under_compile_equals_eager_for_every_size(mode):
    # under torch.compile grouping pads and ungroups by gathers (no size-dependent branch
    # or slice); eager pads only where needed: the two must give the same layouts
    from mmevt.ops import group_tokens, grouped_distance, ungroup_tokens

    def layouts(x, hw):
        grouped = group_tokens(x, 16, mode, hw, pad_value=-1.)
        return grouped, ungroup_tokens(grouped * 2, x.shape[1], mode, hw), \
            grouped_distance(hw, 16, mode, 'euclidean')
    compiled, _ = _compiled(layouts, 'eager', dynamic=True)
    for i, hw in enumerate([(8, 12), (7, 9), (12, 12), (5, 17)]):  # filled and padded
        x = torch.randn(2, hw[0] * hw[1], 3, 4, requires_grad=True)
        with torch._dynamo.config.patch(error_on_recompile=i > 0):
            got = compiled(x, hw)
        want = layouts(x, hw)
        for a, b in zip(got, want):
            assert torch.equal(a, b)
        torch.testing.assert_close(got[1], 2 * x)
        # the gathers' gradients: each token back from its one slot, padded slots dropped
        (grad, ) = torch.autograd.grad(got[0].sum() + got[1].sum(), x)
        assert torch.equal(grad, torch.full_like(x, 3.))
