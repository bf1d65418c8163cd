"""External Attention and Bi-Level Routing Attention against plain dense references."""
import pytest
import torch
from torch import nn

from helpers import probe_loss
from mmevt.models import EVT
from mmevt.models.layers import BiLevelRoutingAttention, ExternalAttention


def test_external_attention_matches_explicit_double_normalisation():
    torch.manual_seed(0)
    ea = ExternalAttention(12, num_heads=3, memory_size=5).double()
    x = torch.randn(2, 4, 6, 12, dtype=torch.float64)
    q = ea.q(x).view(2, 24, 3, 4)
    expected = torch.empty_like(q)
    for b in range(2):
        for h in range(3):
            logits = q[b, :, h] @ ea.mk.weight.t()  # (N, S)
            a = torch.exp(logits) / torch.exp(logits).sum(0, keepdim=True)  # over tokens
            a = a / a.sum(1, keepdim=True)  # over memory slots
            expected[b, :, h] = a @ ea.mv.weight.t()
    expected = ea.proj(expected.reshape(2, 4, 6, 12))
    torch.testing.assert_close(ea(x), expected)


def _dense_attention_with_lepe(bra, x):
    q, k, v = bra.qkv(x).chunk(3, -1)
    b, h, w, c = x.shape
    heads = bra.num_heads
    qh, kh, vh = (t.reshape(b, h * w, heads, c // heads).transpose(1, 2) for t in (q, k, v))
    a = (qh @ kh.transpose(-1, -2) * bra.scale).softmax(-1)
    out = (a @ vh).transpose(1, 2).reshape(b, h, w, c) + bra.lepe(v)
    return bra.proj(out)


@pytest.mark.parametrize('hw,n_win', [((12, 12), 3), ((10, 13), 3), ((7, 5), 4)])
def test_routing_with_all_regions_equals_full_attention(hw, n_win):
    torch.manual_seed(0)
    bra = BiLevelRoutingAttention(16, num_heads=2, n_win=n_win, topk=n_win * n_win).double()
    x = torch.randn(2, *hw, 16, dtype=torch.float64)
    torch.testing.assert_close(bra(x), _dense_attention_with_lepe(bra, x))


@pytest.mark.parametrize('seed', range(4))
def test_routing_attends_only_to_the_topk_regions(seed):
    torch.manual_seed(seed)
    bra = BiLevelRoutingAttention(8, num_heads=1, n_win=2, topk=1, lepe=False).double()
    bra.proj = nn.Identity()
    x = torch.randn(1, 4, 4, 8, dtype=torch.float64, requires_grad=True)
    out = bra(x)
    # 2x2 regions of 2x2 tokens; the top-left token's output depends on its own query and on
    # the keys / values of the one region routed to its region (the choice itself passes no
    # gradient): at most 5 of the 16 tokens, in at most 2 regions
    grad, = torch.autograd.grad(out[0, 0, 0].sum(), x)
    touched = grad.abs().sum(-1)[0] > 0  # (4, 4) tokens
    q, k, _ = bra.qkv(x).detach().chunk(3, -1)
    region_mean = lambda t: t[0].view(2, 2, 2, 2, 8).mean((1, 3)).reshape(4, 8)  # noqa: E731
    routed = int((region_mean(q)[0] @ region_mean(k).t()).argmax())  # region of token (0, 0)
    expected = torch.zeros(4, 4, dtype=torch.bool)
    expected[2 * (routed // 2):2 * (routed // 2) + 2, 2 * (routed % 2):2 * (routed % 2) + 2] = 1
    expected[0, 0] = True
    assert torch.equal(touched, expected)
    assert touched.sum() <= 5


@pytest.mark.parametrize('module', [ExternalAttention(16, 2, 8),
                                    BiLevelRoutingAttention(16, 2, 3, 2)])
def test_mixers_handle_odd_sizes_and_backward(module):
    x = torch.randn(2, 7, 11, 16, requires_grad=True)
    out = module(x)
    assert out.shape == x.shape and torch.isfinite(out).all()
    out.square().mean().backward()
    assert torch.isfinite(x.grad).all()
    assert all(p.grad is not None for p in module.parameters())


def test_backbone_accepts_external_and_routing_mixers():
    model = EVT('evt-test', mixers=[dict(type='routing', n_win=4, topk=4),
                                    dict(type='external', memory_size=16), 'group_dilate',
                                    'full'])
    assert isinstance(model.stages[0].blocks[0].attn, BiLevelRoutingAttention)
    assert isinstance(model.stages[1].blocks[0].attn, ExternalAttention)
    outs = model(torch.randn(1, 3, 70, 90))
    assert [o.shape[1] for o in outs] == [16, 32, 64, 128]
    probe_loss(outs).backward()
    for attn in (model.stages[0].blocks[0].attn, model.stages[1].blocks[0].attn):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attn.parameters())
    with pytest.raises(ValueError, match=r"only \['external', 'routing'\] take arguments"):
        EVT('evt-test', mixers=[dict(type='group', group_size=8)] + ['full'] * 3)
    with pytest.raises(ValueError, match=r'n_win and topk must be positive'):
        EVT('evt-test', mixers=[dict(type='routing', topk=0)] + ['full'] * 3)


def test_backbone_2d_window_mixers_alternate_and_match_the_1d_layout_sizes():
    model = EVT('evt-test', mixers=['window_grid', 'window', 'grid', 'full'],
                group_sizes=[16, 16, 9, 16])
    modes = [[blk.attn.mode for blk in stage.blocks] for stage in model.stages]
    assert modes == [['window'], ['window'], ['grid', 'grid'], ['full']]
    deeper = EVT(dict(embed_dims=[16, 32], depths=[3, 1], num_heads=[1, 2],
                      mixers=['window_grid', 'full'], group_sizes=16), out_indices=(0, 1))
    assert [blk.attn.mode for blk in deeper.stages[0].blocks] == ['window', 'grid', 'window']
    outs = model(torch.randn(1, 3, 45, 77))  # grids not divisible by the window sides
    assert [o.shape[2:] for o in outs] == [(12, 20), (6, 10), (3, 5), (2, 3)]
    probe_loss(outs).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    assert not missing


def test_mixers_are_registered_in_the_toolkits():
    import mmevt  # noqa: F401
    from mmdet.registry import MODELS as DET
    from mmseg.registry import MODELS as SEG
    assert isinstance(DET.build(dict(type='ExternalAttention', embed_dims=8)), ExternalAttention)
    assert isinstance(SEG.build(dict(type='BiLevelRoutingAttention', embed_dims=8, num_heads=2)),
                      BiLevelRoutingAttention)


def test_every_layout_is_a_mixer_of_its_own_name():
    from mmevt.models.layers import SpatialDecayAttention, build_mixer
    from mmevt.models.layers.mixers import MIXERS, needs_square_group
    from mmevt.ops import LAYOUTS
    for mode, lay in LAYOUTS.items():
        assert (mode in MIXERS) == lay.mixer
        attn = build_mixer(mode, 0, 16, 2, group_size=4)
        assert isinstance(attn, SpatialDecayAttention) and attn.mode == mode
        assert needs_square_group(mode) == lay.grid


def test_build_mixer_never_drops_an_argument():
    from mmevt.models.layers import build_mixer
    with pytest.raises(ValueError, match=r"mixer 'external' \(ExternalAttention\) takes no "
                                         r"\['decay'\]; it takes \[.*'memory_size'"):
        build_mixer('external', 0, 16, 2, decay='euclidean')
    with pytest.raises(ValueError, match=r"mixer 'group' \(SpatialDecayAttention\) takes no "
                                         r"\['n_win'\]"):
        build_mixer('group', 0, 16, 2, n_win=2)
    routing = build_mixer(dict(type='routing', n_win=2), 0, 16, 2, topk=1, attn_drop_rate=0.1)
    assert (routing.n_win, routing.topk, routing.attn_drop_rate) == (2, 1, 0.1)
    with pytest.raises(ValueError, match=r"mixer 'routing': \['topk'\] given both in the "
                                         r'mixer dict .* and as options'):
        build_mixer(dict(type='routing', topk=2), 0, 16, 2, topk=1)


@pytest.mark.parametrize('module', [ExternalAttention(16, 2, 8, attn_drop_rate=0.5),
                                    BiLevelRoutingAttention(16, 2, 2, 2, attn_drop_rate=0.5)])
def test_module_mixers_drop_attention_in_training_only(module):
    torch.manual_seed(0)
    x = torch.randn(1, 6, 6, 16)
    assert not torch.allclose(module.train()(x), module(x))
    module.eval()
    torch.testing.assert_close(module(x), module(x))
