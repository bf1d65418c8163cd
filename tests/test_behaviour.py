"""Public behaviour pinned by a stored fixture: same weights and settings, same outputs.

Two explicit custom archs (never a zoo name, whose defaults may change) cover EuSA in the
group / dilate / 2D window / grid / full modes with padding, LePE, CPE and layer scale, and
RMT's decomposed MaSA with the rotary shift next to the routing and external mixers. Weights
are set from each ``state_dict`` key in sorted order, so the fixture does not depend on the
order modules are built in; the key names and shapes are pinned too (converters and strict
loads rely on them).

Regenerate (only when a change of behaviour is intended)::

    python tests/test_behaviour.py
"""
import hashlib
import os.path as osp

import torch

FIXTURE = osp.join(osp.dirname(osp.abspath(__file__)), 'fixtures', 'behaviour.pt')
_COMMON = dict(embed_dims=[16, 32, 48, 64], num_heads=[2, 4, 4, 8], init_values=2.,
               heads_ranges=[4, 4, 6, 6], mlp_ratios=2, drop_path_rate=0.)
ARCHS = {
    'eusa': dict(_COMMON, depths=[2, 1, 2, 1], decay='euclidean', use_rope=False,
                 mixers=['group_dilate', 'group', 'window_grid', 'full'],
                 group_sizes=[16, 20, 4, 16], layer_scales=[0., 0.5, 0., 0.5], stem='conv',
                 cpe=True, lepe=True, ffn_dwconv=True),
    'masa': dict(_COMMON, depths=[2, 1, 1, 1], decay='manhattan', use_rope=True,
                 mixers=['decomposed', dict(type='routing', n_win=3, topk=2),
                         dict(type='external', memory_size=8), 'full'],
                 group_sizes=16, layer_scales=[0.5, 0., 0., 0.5], stem='patch', cpe=True,
                 lepe=True, ffn_dwconv=False),
}
INPUT_SHAPE = (2, 3, 70, 90)  # stage grids 18x23, 9x12, 5x6, 3x3: groups need padding


def build(name: str):
    """The model of ``ARCHS[name]`` with deterministic weights, in eval mode."""
    from mmevt.models import EVT
    model = EVT(ARCHS[name], out_indices=(0, 1, 2, 3), norm_cfg=dict(type='BN'),
                out_norm_cfg=dict(type='LN', eps=1e-6), attn_impl='auto').eval()
    gen = torch.Generator().manual_seed(0)
    state = model.state_dict()
    for key in sorted(state):
        t = state[key]
        if not t.is_floating_point():
            continue
        if key.endswith('running_var'):
            t.copy_(torch.rand(t.shape, generator=gen) + 0.5)
        else:
            t.copy_(torch.randn(t.shape, generator=gen) * 0.2)
    return model


def key_digest(model) -> str:
    """sha256 of the ``state_dict`` key names and shapes, in order."""
    lines = [f'{k}:{tuple(v.shape)}' for k, v in model.state_dict().items()]
    return hashlib.sha256('\n'.join(lines).encode()).hexdigest()


def summarise(outs) -> dict:
    """Per output map: per-channel means and a corner crop (a few KB in all)."""
    return dict(channel_means=[o.mean((0, 2, 3)) for o in outs],
                corners=[o[:, :4, :3, :3].clone() for o in outs])


def run(name: str) -> dict:
    model = build(name)
    x = torch.randn(INPUT_SHAPE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        outs = model(x)
    return dict(keys=key_digest(model), num_keys=len(model.state_dict()),
                shapes=[tuple(o.shape) for o in outs], **summarise(outs))


def test_outputs_and_state_dict_keys_match_the_stored_fixture():
    expected = torch.load(FIXTURE)
    for name in ARCHS:
        got, want = run(name), expected[name]
        assert got['num_keys'] == want['num_keys'], name
        assert got['keys'] == want['keys'], f'{name}: state_dict key names or shapes changed'
        assert got['shapes'] == want['shapes'], name
        for field in ('channel_means', 'corners'):
            for i, (a, b) in enumerate(zip(got[field], want[field])):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4,
                                           msg=lambda m: f'{name} {field}[{i}]: {m}')


def test_fixture_is_sensitive_to_the_weights():
    # a fixture that any output passes would pin nothing: one changed weight must show
    expected = torch.load(FIXTURE)['eusa']
    model = build('eusa')
    with torch.no_grad():
        model.stages[2].blocks[1].attn.v.weight.mul_(1.5)
        outs = model(torch.randn(INPUT_SHAPE, generator=torch.Generator().manual_seed(1)))
    got = summarise(outs)
    assert not torch.allclose(got['corners'][2], expected['corners'][2], atol=1e-3)


if __name__ == '__main__':
    torch.save({name: run(name) for name in ARCHS}, FIXTURE)
    print(f'wrote {FIXTURE}')
