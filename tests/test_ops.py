"""Functional ops: decay, grouping and the three attention paths."""
import math
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import mmevt.ops.attention as attention_ops
import mmevt.ops.grouping as grouping_ops
from mmevt.ops import (ATTN_PATHS, DECAY_KINDS, LAYOUTS, GridCache, Layout, attention_reference,
                       decay_bias, decay_log_rates, decomposed_decay_attention,
                       decomposed_decay_probs, flex_available, grid_coords, group_token_index,
                       group_tokens, grouped_distance, has_padding, num_groups,
                       pairwise_distance, spatial_decay_attention, spatial_decay_probs,
                       ungroup_tokens)
from mmevt.ops.depthwise import conv_nhwc, dwconv, residual_kernel
from mmevt.ops.recompute import norm_conv_ffn, norm_linears

# every fast path this torch has, every layout, every decay: from the tables, never spelled out
IMPLS = [n for n, p in ATTN_PATHS.items() if n != 'reference' and p.missing() is None]
MODES = list(LAYOUTS)
GROUPED_MODES = [m for m, lay in LAYOUTS.items() if lay.pattern is not None]
# a layout that is not in the table: the record a contributor would add (Swin-style shift)
SHIFTED = {'shifted_group': Layout(LAYOUTS['group'].pattern, shift=True),
           'shifted_window': Layout(LAYOUTS['window'].pattern, grid=True, shift=True)}


def _square_if_grid(mode, s):
    """``s`` made a square group size (windows of 1x1 .. 4x4 tokens) for 2D layouts."""
    lay = LAYOUTS.get(mode) or SHIFTED[mode]
    return (s % 4 + 1) ** 2 if lay.grid else s


@pytest.fixture
def with_shifted_layouts(monkeypatch):
    monkeypatch.setattr(grouping_ops, 'LAYOUTS', {**LAYOUTS, **SHIFTED})
needs_flex = pytest.mark.skipif(not flex_available(), reason='torch without FlexAttention')


def test_decay_rates_match_formula():
    lg = decay_log_rates(4, 2, 4)
    for h in range(4):
        assert lg[h].item() == pytest.approx(math.log(1 - 2 ** (-2 - 4 * h / 4)), rel=1e-6)
    assert (lg < 0).all() and (lg.diff() > 0).all()  # later heads decay more slowly


def test_distances_on_known_grid():
    p = grid_coords((3, 4))
    assert p.shape == (12, 2) and p[5].tolist() == [1., 1.]  # row-major
    eu, ma = pairwise_distance(p, p, 'euclidean'), pairwise_distance(p, p, 'manhattan')
    assert torch.equal(eu, eu.t()) and torch.equal(ma, ma.t())
    assert (eu.diagonal() == 0).all()
    # (0,0) -> (2,3): Euclidean sqrt(13), Manhattan 5
    assert eu[0, 11].item() == pytest.approx(math.sqrt(13))
    assert ma[0, 11].item() == 5
    assert (eu <= ma + 1e-6).all() and (ma <= eu * math.sqrt(2) + 1e-5).all()
    # they agree along one axis and differ off-axis
    assert eu[0, 3] == ma[0, 3] and eu[0, 5] < ma[0, 5]
    assert (pairwise_distance(p, p, 'none') == 0).all()
    with pytest.raises(ValueError, match="decay must be one of .*'chebyshev'"):
        pairwise_distance(p, p, 'chebyshev')


@pytest.mark.parametrize('mode', GROUPED_MODES + list(SHIFTED))
@pytest.mark.parametrize('hw,s', [((3, 4), 4), ((1, 13), 4), ((5, 7), 4), ((8, 8), 49),
                                  ((14, 14), 64), ((2, 3), 9)])
def test_grouping_is_a_permutation_and_round_trips(mode, hw, s, with_shifted_layouts):
    n = hw[0] * hw[1]
    x = torch.randn(2, n, 3)
    g = group_tokens(x, s, mode, hw)
    idx = group_token_index(hw, s, mode)
    assert g.shape == (2, idx.shape[0], s, 3)
    assert torch.equal(ungroup_tokens(g, n, mode, hw), x)
    real = idx[idx < n]
    assert sorted(real.tolist()) == list(range(n))  # each token exactly once
    # the layout and the index table agree, padding is zero
    flat = torch.cat([x, x.new_zeros(2, 1, 3)], 1)
    assert torch.equal(g, flat[:, idx.clamp(max=n)])
    assert ((idx < n).any(1)).all()  # every group has a real token: no all-padding softmax
    assert has_padding(hw, s, mode) == bool((idx >= n).any())
    rows, cols = real // hw[1], real % hw[1]
    if mode == 'dilate':  # token t is in group t mod G
        G = num_groups(n, s)
        for grp in range(G):
            assert all(t % G == grp for t in idx[grp].tolist() if t < n)
    if mode == 'shifted_group':  # the sequence rolled by half a group: slot 0 holds S // 2
        assert idx[0, 0].item() == (s // 2) % n
    if (LAYOUTS.get(mode) or SHIFTED[mode]).grid:
        side = math.isqrt(s)
        gh, gw = num_groups(hw[0], side), num_groups(hw[1], side)
        assert idx.shape[0] == gh * gw
        grp = torch.arange(idx.shape[0])[:, None].expand_as(idx)[idx < n]
        if mode == 'shifted_window':  # the grid rolled by half a window on each side
            r, c = (rows - side // 2) % hw[0], (cols - side // 2) % hw[1]
            assert torch.equal(grp, (r // side) * gw + c // side)
        elif mode == 'window':  # a token's window is (row // s, col // s)
            assert torch.equal(grp, (rows // side) * gw + cols // side)
        else:  # a token's grid window is (row mod Gh, col mod Gw)
            assert torch.equal(grp, (rows % gh) * gw + cols % gw)


def test_grouping_docstring_describes_each_layout_of_the_table():
    # the one prose list of the layouts, beside the table: one bullet per record, in order
    assert re.findall(r'^- ``(\w+)``', grouping_ops.__doc__, re.M) == list(LAYOUTS)


def test_2d_modes_need_a_square_group_size_and_the_grid():
    x = torch.randn(1, 12, 2)
    with pytest.raises(ValueError, match=r"mode 'window' needs a square group_size .* got 50"):
        group_tokens(x, 50, 'window', (3, 4))
    with pytest.raises(ValueError, match=r"mode 'grid' groups a 2D grid: pass hw"):
        group_tokens(x, 4, 'grid')


def test_padded_keys_get_zero_weight_and_no_nan():
    # 5 tokens in groups of 4: the last group holds one real token and 3 pads
    dist = grouped_distance((1, 5), 4, 'group', 'euclidean')
    bias = decay_bias(decay_log_rates(2, 2, 4), dist)  # (G, heads, S, S)
    assert bias.shape == (2, 2, 4, 4)
    assert torch.isinf(bias[-1, :, :, 1:]).all() and torch.isfinite(bias[-1, :, :, 0]).all()
    q, k, v = (torch.randn(1, 5, 2, 8) for _ in range(3))
    for impl in ('reference', 'sdpa'):
        out = spatial_decay_attention(q, k, v, (1, 5), decay_log_rates(2, 2, 4),
                                      mode='group', group_size=4, attn_impl=impl)
        assert torch.isfinite(out).all()
        # the lone token of the last group only sees itself
        torch.testing.assert_close(out[:, 4], v[:, 4])


def _masked_full_reference(q, k, v, hw, log_gamma, decay, mode, group_size):
    """Full attention over all tokens with the decay bias and a same-group block mask."""
    n = hw[0] * hw[1]
    idx = group_token_index(hw, group_size, mode)
    group_of = torch.empty(n, dtype=torch.long)
    for g, row in enumerate(idx):
        group_of[row[row < n]] = g
    p = grid_coords(hw)
    bias = log_gamma[:, None, None] * pairwise_distance(p, p, decay)[None]
    bias = bias.masked_fill(group_of[:, None] != group_of[None, :], float('-inf'))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    return attention_reference(qt, kt, vt, bias[None], q.shape[-1] ** -0.5).transpose(1, 2)


@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 9), s=st.integers(1, 20), heads=st.integers(1, 3),
       mode=st.sampled_from(MODES + list(SHIFTED)), decay=st.sampled_from(DECAY_KINDS))
def test_grouped_attention_equals_block_masked_full_attention(h, w, s, heads, mode, decay):
    s = _square_if_grid(mode, s)
    torch.manual_seed(h * 100 + w)
    q, k, v = (torch.randn(2, h * w, heads, 8, dtype=torch.float64) for _ in range(3))
    lg = decay_log_rates(heads, 2, 4).double()
    with pytest.MonkeyPatch.context() as mp:  # a new layout record is all the ops need
        mp.setattr(grouping_ops, 'LAYOUTS', {**LAYOUTS, **SHIFTED})
        expected = _masked_full_reference(q, k, v, (h, w), lg, decay, mode, s)
        got = spatial_decay_attention(q, k, v, (h, w), lg, decay, mode, s,
                                      attn_impl='reference')
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize('impl', IMPLS)
@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('decay', DECAY_KINDS)
def test_fast_paths_agree_with_reference_fp32(impl, mode, decay):
    torch.manual_seed(0)
    hw = (7, 11)
    q, k, v = (torch.randn(2, 77, 4, 16, requires_grad=True) for _ in range(3))
    lg = decay_log_rates(4, 2, 6)
    ref = spatial_decay_attention(q, k, v, hw, lg, decay, mode, 16, attn_impl='reference')
    if not ATTN_PATHS[impl].cpu_backward:  # Flex: torch raises on a CPU backward
        out = spatial_decay_attention(q.detach(), k.detach(), v.detach(), hw, lg, decay, mode,
                                      16, attn_impl=impl)
        torch.testing.assert_close(out, ref.detach(), atol=1e-5, rtol=1e-5)
        return
    out = spatial_decay_attention(q, k, v, hw, lg, decay, mode, 16, attn_impl=impl)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    g_ref = torch.autograd.grad(ref.square().sum(), (q, k, v))
    g_out = torch.autograd.grad(out.square().sum(), (q, k, v))
    for a, b in zip(g_out, g_ref):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('impl', IMPLS)
@pytest.mark.parametrize('mode', MODES)
def test_fast_paths_agree_with_reference_bf16(impl, mode):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 45, 2, 16) for _ in range(3))
    lg = decay_log_rates(2, 2, 4)
    ref = spatial_decay_attention(q, k, v, (5, 9), lg, 'euclidean', mode, 9,
                                  attn_impl='reference')
    out = spatial_decay_attention(*(t.bfloat16() for t in (q, k, v)), (5, 9), lg, 'euclidean',
                                  mode, 9, attn_impl=impl)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)


def test_attention_builds_the_bias_once_per_grid(monkeypatch):
    built = []
    real = attention_ops.grouped_distance
    monkeypatch.setattr(attention_ops, 'grouped_distance',
                        lambda *a, **kw: built.append(a[0]) or real(*a, **kw))
    cache, lg = GridCache(max_entries=2), decay_log_rates(2, 2, 4)
    for hw in ((4, 4), (4, 4), (5, 4), (4, 4), (6, 4), (4, 4), (5, 4)):
        q = torch.randn(1, hw[0] * hw[1], 2, 8)
        spatial_decay_attention(q, q, q, hw, lg, mode='group', group_size=8, cache=cache)
    # the least recently used grid goes first: (4, 4) stays, (5, 4) is built again
    assert built == [(4, 4), (5, 4), (6, 4), (5, 4)] and len(cache) == 2
    q = torch.randn(1, 16, 2, 8)
    spatial_decay_attention(q, q, q, (4, 4), lg, mode='dilate', group_size=8, cache=cache)
    assert built[-1] == (4, 4)  # another layout is another table


def test_decomposed_matches_explicit_row_then_column():
    torch.manual_seed(0)
    b, h, w, heads, d = 2, 5, 6, 2, 8
    q, k, v = (torch.randn(b, h, w, heads, d, dtype=torch.float64) for _ in range(3))
    lg = decay_log_rates(heads, 2, 4).double()
    got = decomposed_decay_attention(q, k, v, lg, attn_impl='sdpa')
    expected = torch.empty_like(v)
    rows = torch.empty_like(v)
    for hh in range(heads):
        for r in range(h):  # along each row, decay |dc|
            logits = q[:, r, :, hh] @ k[:, r, :, hh].transpose(-1, -2) * d ** -0.5
            dc = (torch.arange(w)[:, None] - torch.arange(w)[None]).abs().double()
            rows[:, r, :, hh] = (logits + lg[hh] * dc).softmax(-1) @ v[:, r, :, hh]
        for c in range(w):  # then along each column, decay |dr|, applied to the rows' result
            logits = q[:, :, c, hh] @ k[:, :, c, hh].transpose(-1, -2) * d ** -0.5
            dr = (torch.arange(h)[:, None] - torch.arange(h)[None]).abs().double()
            expected[:, :, c, hh] = (logits + lg[hh] * dr).softmax(-1) @ rows[:, :, c, hh]
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(decomposed_decay_attention(q, k, v, lg, attn_impl='reference'),
                               expected)


@pytest.mark.parametrize('mode', MODES + list(SHIFTED))
def test_dense_probs_are_what_the_attention_applies(mode):
    s = _square_if_grid(mode, 10)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 35, 3, 8, dtype=torch.float64) for _ in range(3))
    lg = decay_log_rates(3, 2, 4).double()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grouping_ops, 'LAYOUTS', {**LAYOUTS, **SHIFTED})
        probs = spatial_decay_probs(q, k, (5, 7), lg, 'euclidean', mode, s)  # (B, heads, N, N)
        expected = spatial_decay_attention(q, k, v, (5, 7), lg, 'euclidean', mode, s)
    torch.testing.assert_close(torch.einsum('bhij,bjhd->bihd', probs, v), expected)


def test_decomposed_dense_probs_compose_the_row_and_column_passes():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 35, 3, 8, dtype=torch.float64) for _ in range(3))
    lg = decay_log_rates(3, 2, 4).double()
    qd, kd, vd = (t.view(2, 5, 7, 3, 8) for t in (q, k, v))
    probs = decomposed_decay_probs(qd, kd, lg)
    torch.testing.assert_close(torch.einsum('bhij,bjhd->bihd', probs, v).view(2, 5, 7, 3, 8),
                               decomposed_decay_attention(qd, kd, vd, lg))


def test_bad_impl_and_mode_are_value_errors():
    q = torch.randn(1, 4, 1, 8)
    lg = decay_log_rates(1, 2, 4)
    with pytest.raises(ValueError, match="attn_impl must be one of .*'cuda'"):
        spatial_decay_attention(q, q, q, (2, 2), lg, attn_impl='cuda')
    with pytest.raises(ValueError, match="mode must be one of .*'windows'"):
        spatial_decay_attention(q, q, q, (2, 2), lg, mode='windows')


@needs_flex
def test_flex_backward_on_cpu_is_a_clear_error():
    q = torch.randn(1, 4, 1, 16, requires_grad=True)
    with pytest.raises(ValueError, match="attn_impl='flex' has no backward on CPU"):
        spatial_decay_attention(q, q, q, (2, 2), decay_log_rates(1, 2, 4), attn_impl='flex')


def test_which_paths_can_run_is_separate_from_the_choice(monkeypatch):
    from mmevt.ops import impl_unavailable, resolve_impl
    cpu = torch.device('cpu')
    assert impl_unavailable('sdpa', cpu, needs_grad=True) is None
    assert impl_unavailable('reference', cpu, needs_grad=True) is None
    assert impl_unavailable('flex', cpu) is None
    assert 'no backward on CPU' in impl_unavailable('flex', cpu, needs_grad=True)
    monkeypatch.setattr(attention_ops, '_flex_attention', None)  # a torch without Flex
    assert 'needs torch >= 2.5' in impl_unavailable('flex', cpu)
    with pytest.raises(ValueError, match=r"attn_impl='flex' needs torch >= 2.5"):
        resolve_impl('flex', cpu)
    monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: True)
    assert resolve_impl('auto', torch.device('cuda'), 32) == 'sdpa'  # Flex cannot run


def test_auto_path_choice_per_device_and_compile(monkeypatch):
    from mmevt.ops import resolve_impl
    cuda, cpu = torch.device('cuda'), torch.device('cpu')
    assert resolve_impl('auto', cpu, 32) == 'sdpa'
    assert resolve_impl('auto', cuda, 32) == 'sdpa'  # eager Flex is unfused: SDPA
    assert resolve_impl('reference', cuda, 32) == 'reference'  # explicit choice wins
    monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: True)
    assert resolve_impl('auto', cuda, 32) == ('flex' if flex_available() else 'sdpa')
    assert resolve_impl('auto', cuda, 24) == 'sdpa'  # head dim Flex kernels do not tile
    assert resolve_impl('auto', cpu, 32) == 'sdpa'
    assert resolve_impl('sdpa', cuda, 32) == 'sdpa'
    # Flex cannot apply attention dropout: 'auto' falls back, an explicit 'flex' is an error
    assert resolve_impl('auto', cuda, 32, dropout=True) == 'sdpa'
    if flex_available():
        with pytest.raises(ValueError, match=r"attn_impl='flex' cannot apply attention dropout"):
            resolve_impl('flex', cuda, 32, dropout=True)


def test_auto_rule_answers_for_a_case_it_is_not_running_in():
    # the GPU report asks what 'auto' picks compiled while it runs eager (and back)
    from mmevt.ops import choose_impl
    cuda = torch.device('cuda')
    assert choose_impl(cuda, 32, compiling=True) == ('flex' if flex_available() else 'sdpa')
    assert choose_impl(cuda, 32, compiling=False) == 'sdpa'
    assert choose_impl(torch.device('cpu'), 32, compiling=True) == 'sdpa'


def test_path_support_is_one_table_read_by_the_checks(monkeypatch):
    from mmevt.ops import impl_unavailable
    cpu = torch.device('cpu')
    for name, path in ATTN_PATHS.items():
        if path.missing() is not None:
            continue
        assert (impl_unavailable(name, cpu, dropout=True) is None) == path.dropout, name
        assert (impl_unavailable(name, cpu, needs_grad=True) is None) == path.cpu_backward
    # a path that loses a capability in the table loses it everywhere
    monkeypatch.setitem(ATTN_PATHS, 'sdpa', ATTN_PATHS['sdpa']._replace(dropout=False))
    assert 'cannot apply attention dropout' in impl_unavailable('sdpa', cpu, dropout=True)
    with pytest.raises(TypeError):  # the capability flags are keywords, never positional
        impl_unavailable('sdpa', cpu, True)


@pytest.mark.parametrize('impl', [n for n, p in ATTN_PATHS.items()
                                  if p.dropout and p.missing() is None])
@pytest.mark.parametrize('op', ['grouped', 'decomposed'])
def test_attention_dropout_is_unbiased_and_random(impl, op):
    # 2000 copies of one small problem in the batch: each draws its own dropout mask
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 3, 4, 2, 8).expand(2000, -1, -1, -1, -1) for _ in range(3))
    lg = decay_log_rates(2, 2, 4)

    def run(p):
        if op == 'decomposed':
            return decomposed_decay_attention(q, k, v, lg, attn_impl=impl, dropout_p=p)
        flat = [t.reshape(2000, 12, 2, 8) for t in (q, k, v)]
        return spatial_decay_attention(*flat, (3, 4), lg, mode='group', group_size=4,
                                       attn_impl=impl, dropout_p=p)

    expected, first, second = run(0.)[0], run(0.5), run(0.5)
    assert not torch.allclose(first, second)  # a new mask per call
    assert not torch.allclose(first[0], first[1])  # and per sample
    # inverted dropout keeps the expectation: the mean over the masks is the plain output
    err = (first.mean(0) - expected).norm() / expected.norm()
    assert err < 0.1, err


def test_cache_memoises_none_and_bounds_entries():
    cache, calls = GridCache(max_entries=2), []
    build = lambda: calls.append(1)  # noqa: E731  returns None
    assert cache.get(('a', ), build) is None and cache.get(('a', ), build) is None
    assert len(calls) == 1 and ('a', ) in cache
    cache.get(('b', ), build), cache.get(('c', ), build), cache.get(('a', ), build)
    assert len(calls) == 4  # 'a' was evicted
    assert len(cache) == 2


def test_deprecated_names_still_work_and_warn():
    from mmevt.ops import DecayBiasCache
    torch.manual_seed(0)
    q = torch.randn(1, 12, 2, 8)
    lg = decay_log_rates(2, 2, 4)
    new = spatial_decay_attention(q, q, q, (3, 4), lg, mode='group', group_size=4,
                                  attn_impl='reference', cache=GridCache())
    with pytest.warns(FutureWarning, match='DecayBiasCache is deprecated'):
        old_cache = DecayBiasCache()
    with pytest.warns(FutureWarning, match=r'impl= is deprecated .* use attn_impl='):
        old = spatial_decay_attention(q, q, q, (3, 4), lg, mode='group', group_size=4,
                                      impl='reference', bias_cache=old_cache)
    torch.testing.assert_close(old, new)
    with pytest.raises(ValueError, match=r'pass cache= only .* got both'):
        spatial_decay_attention(q, q, q, (3, 4), lg, cache=GridCache(), bias_cache=GridCache())


@needs_flex
def test_flex_padding_block_mask_is_cached_and_only_built_with_padding(monkeypatch):
    from mmevt.ops.attention import padding_block_mask
    assert padding_block_mask((8, 8), 16, 'group', 2, torch.device('cpu')) is None
    assert padding_block_mask((8, 8), 16, 'window', 2, torch.device('cpu')) is None
    mask = padding_block_mask((7, 11), 16, 'dilate', 2, torch.device('cpu'))
    # groups in Flex's batch dim (batch 2, batch-major), broadcast over heads
    assert mask.shape == (2 * num_groups(77, 16), 1, 16, 16)
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 77, 2, 16) for _ in range(3))
    lg, cache = decay_log_rates(2, 2, 4), GridCache()
    ref = spatial_decay_attention(q, k, v, (7, 11), lg, mode='dilate', group_size=16,
                                  attn_impl='reference')
    masks = []
    monkeypatch.setattr(attention_ops, 'padding_block_mask',
                        lambda *a: masks.append(padding_block_mask(*a)) or masks[-1])
    for _ in range(2):
        out = spatial_decay_attention(q, k, v, (7, 11), lg, mode='dilate', group_size=16,
                                      attn_impl='flex', cache=cache)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert len(masks) == 1 and masks[0] is not None  # built once, then from the cache


@pytest.mark.parametrize('op', ['grouped', 'decomposed'])
def test_sdpa_path_uses_the_fused_cpu_kernel(op):
    # a 3-D mask sends SDPA to its unfused math kernel on CPU: RMT's baseline was 1.5x slower
    from torch.profiler import ProfilerActivity, profile
    q = torch.randn(2, 6, 7, 2, 16)
    lg = decay_log_rates(2, 2, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        if op == 'grouped':
            spatial_decay_attention(*(t.reshape(2, 42, 2, 16) for t in (q, q, q)), (6, 7),
                                    lg, mode='group', group_size=16, attn_impl='sdpa')
        else:
            decomposed_decay_attention(q, q, q, lg, attn_impl='sdpa')
    names = {e.key for e in prof.key_averages()}
    assert 'aten::_scaled_dot_product_flash_attention_for_cpu' in names
    assert 'aten::_scaled_dot_product_attention_math' not in names


def _plain_ffn(x, nw, nb, w1, b1, dw, db, w2, b2, gamma):
    """The FFN branch op by op, as autograd runs it without the recomputing op."""
    y = x if nw is None else F.layer_norm(x, x.shape[-1:], nw, nb, 1e-6)
    a = F.gelu(F.linear(y, w1, b1))
    if dw is not None:
        a = a + F.conv2d(a.permute(0, 3, 1, 2), dw, db, 1, 1, 1, a.shape[-1]).permute(0, 2, 3, 1)
    out = F.linear(a, w2, b2)
    return out if gamma is None else out * gamma


@pytest.mark.parametrize('norm,conv,scale', [(True, True, False), (True, True, True),
                                             (False, False, False), (True, False, True)])
@pytest.mark.parametrize('dtype', ['fp32', 'bf16'])
def test_recomputing_ffn_has_the_plain_gradients_and_saves_two_tensors(norm, conv, scale,
                                                                       dtype):
    torch.manual_seed(0)
    c, hidden = 8, 24
    shapes = dict(x=(2, 5, 6, c), nw=(c, ), nb=(c, ), w1=(hidden, c), b1=(hidden, ),
                  dw=(hidden, 1, 3, 3), db=(hidden, ), w2=(c, hidden), b2=(c, ), gamma=(c, ))
    drop = {k for k, on in (('nw', norm), ('nb', norm), ('dw', conv), ('db', conv),
                            ('gamma', scale)) if not on}
    args = {k: None if k in drop else torch.randn(s, requires_grad=True)
            for k, s in shapes.items()}
    grad = torch.randn(2, 5, 6, c)
    amp = torch.autocast('cpu', dtype=torch.bfloat16, enabled=dtype == 'bf16')
    with amp:
        want = _plain_ffn(**args)
    want_grads = torch.autograd.grad(want, [t for t in args.values() if t is not None], grad)
    saved = []
    with amp, torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t,
                                                       lambda t: t):
        got = norm_conv_ffn(args['x'], args['nw'], args['nb'], 1e-6 if norm else None,
                            args['w1'], args['b1'], args['dw'], args['db'], args['w2'],
                            args['b2'], args['gamma'])
    got_grads = torch.autograd.grad(got, [t for t in args.values() if t is not None], grad)
    tol = dict(rtol=0, atol=1e-5) if dtype == 'fp32' else dict(rtol=0, atol=3e-2)
    torch.testing.assert_close(got, want, rtol=0, atol=tol['atol'] * want.abs().max().item())
    for g, w in zip(got_grads, want_grads):  # relative to each gradient's scale
        torch.testing.assert_close(g, w, rtol=0, atol=tol['atol'] * w.abs().max().item())
    # of the activations only the input and fc1's output (hidden width) are kept
    weights = {t.data_ptr() for k, t in args.items() if t is not None and k != 'x'}
    acts = [t for t in saved if t.data_ptr() not in weights]
    assert sorted(t.shape[-1] for t in acts) == [c, hidden]


# kernel 5 on 32 x 40 tokens: the weight gradient from 3 x 3 pieces (on a CPU from 1024
# tokens); kernel 7: overlapping pieces; 3 and small grids: the plain kernel
@pytest.mark.parametrize('k,hw', [(5, (32, 40)), (7, (33, 35)), (5, (6, 7)), (3, (32, 40))])
@pytest.mark.parametrize('dtype', ['fp32', 'bf16'])
def test_dwconv_has_the_plain_gradients(k, hw, dtype):
    torch.manual_seed(0)
    x = torch.randn(2, *hw, 6, requires_grad=True)
    w, b = torch.randn(6, 1, k, k, requires_grad=True), torch.randn(6, requires_grad=True)
    grad = torch.randn(2, *hw, 6)
    amp = torch.autocast('cpu', dtype=torch.bfloat16, enabled=dtype == 'bf16')
    with amp:
        want = F.conv2d(x.permute(0, 3, 1, 2), w, b, 1, k // 2, 1, 6).permute(0, 2, 3, 1)
        got = dwconv(x, w, b)
    atol = 1e-5 if dtype == 'fp32' else 2e-2
    torch.testing.assert_close(got, want, rtol=0, atol=atol * want.abs().max().item())
    for g, e in zip(torch.autograd.grad(got, (x, w, b), grad),
                    torch.autograd.grad(want, (x, w, b), grad)):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=0, atol=atol * e.abs().max().item())
    # a conv with its residual is one conv with 1 added at the centre tap
    x1 = x.detach()
    torch.testing.assert_close(conv_nhwc(x1, residual_kernel(w.detach()), None),
                               x1 + conv_nhwc(x1, w.detach(), None), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('cpe', [False, True])
@pytest.mark.parametrize('dtype', ['fp32', 'bf16'])
def test_norm_linears_saves_the_block_input_only(cpe, dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 5, 8, requires_grad=True)
    nw, nb = torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)
    cw, cb = torch.randn(8, 1, 3, 3, requires_grad=True), torch.randn(8, requires_grad=True)
    lin = [torch.randn(s, requires_grad=True) for s in ((6, 8), (6, ), (8, 8), (8, ))]
    params = [x, nw, nb, *lin] + ([cw, cb] if cpe else [])
    amp = torch.autocast('cpu', dtype=torch.bfloat16, enabled=dtype == 'bf16')
    with amp:
        x1 = x + F.conv2d(x.permute(0, 3, 1, 2), cw, cb, 1, 1, 1, 8).permute(0, 2, 3, 1) \
            if cpe else x
        y = F.layer_norm(x1, (8, ), nw, nb, 1e-6)
        want = [x1] * cpe + [F.linear(y, lin[0], lin[1]), F.linear(y, lin[2], lin[3])]
    grads = [torch.randn(t.shape) for t in want]
    want_grads = torch.autograd.grad(want, params, grads)
    saved = []
    with amp, torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t,
                                                       lambda t: t):
        got = norm_linears(x, nw, nb, 1e-6, *lin, cpe=(cw, cb) if cpe else (None, None))
    atol = 1e-5 if dtype == 'fp32' else 3e-2
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=atol * w.abs().max().item())
    for g, w in zip(torch.autograd.grad(got, params, grads), want_grads):
        torch.testing.assert_close(g, w, rtol=0, atol=atol * w.abs().max().item())
    weights = {t.data_ptr() for t in params[1:]}
    assert [t.data_ptr() for t in saved if t.data_ptr() not in weights] == [x.data_ptr()]
