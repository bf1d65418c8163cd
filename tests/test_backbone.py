"""EVT backbone: arch zoo, shapes, OpenMMLab backbone contract, errors."""
import logging
import re

import pytest
import torch
from torch import nn

from helpers import probe_loss
from mmevt.models import EVT
from mmevt.models.backbones import ARCH_ALIASES, ARCH_NAMES, arch_zoo, resolve_arch
from mmevt.models.backbones.evt import layer_cfg_keys
from mmevt.models.layers import MIXERS, SpatialDecayAttention
from mmevt.ops import ATTN_PATHS, flex_available


@pytest.mark.parametrize('arch', ARCH_NAMES)
def test_every_arch_builds_with_right_shapes_and_channels(arch):
    # on the meta device: shapes only (the large archs take seconds per CPU forward; the
    # numerics are tested on the tiny archs and pinned by test_behaviour.py)
    model = EVT(arch).eval().to('meta')
    dims = arch_zoo[arch]['embed_dims']
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 64, 96, device='meta'))
    assert [tuple(o.shape) for o in outs] == [(1, dims[0], 16, 24), (1, dims[1], 8, 12),
                                             (1, dims[2], 4, 6), (1, dims[3], 2, 3)]
    assert not any(k.endswith(('log_gamma', 'cache')) for k in model.state_dict())


def test_a_training_step_runs_on_the_meta_device():
    # shape-only tools (timm's default-cfg test, counters) run training passes on 'meta',
    # a device without autocast: the training ops must not ask it for autocast's dtype
    model = EVT('evt-test').train().to('meta')
    outs = model(torch.randn(2, 3, 64, 96, device='meta'))
    sum(o.sum() for o in outs).backward()
    assert all(p.grad is not None and p.grad.is_meta for p in model.parameters())


def test_short_and_long_names_are_the_same_arch():
    assert list(arch_zoo) == list(ARCH_NAMES)  # each arch once, under its canonical name
    assert set(ARCH_ALIASES.values()) == set(ARCH_NAMES)
    for alias, name in ARCH_ALIASES.items():
        assert resolve_arch(alias) == resolve_arch(name.upper()) == resolve_arch(name)
    assert ARCH_ALIASES['t'] == ARCH_ALIASES['evt-tiny'] == 'evt-t'
    assert ARCH_ALIASES['evt-swin-base'] == 'evt-swin-b' and ARCH_ALIASES['large'] == 'evt-l'


def test_variant_settings_follow_the_spec():
    t, rt = resolve_arch('evt-t'), resolve_arch('rmt-t')
    assert t['depths'] == [2, 2, 10, 2] and rt['depths'] == [2, 2, 8, 2]
    assert t['mixers'] == ['group_dilate'] * 3 + ['full'] and t['group_sizes'] == [49] * 4
    assert rt['mixers'] == ['decomposed', 'decomposed', 'full', 'full']
    assert t['decay'] == 'euclidean' and rt['decay'] == 'manhattan'
    assert rt['use_rope'] and not t['use_rope']
    assert [resolve_arch(f'evt-{s}')['drop_path_rate'] for s in 'tsbl'] == [0.1, 0.15, 0.4, 0.55]
    assert resolve_arch('evt-swin-t')['group_sizes'] == [49] * 4
    assert resolve_arch('evt-b')['layer_scales'] == [0, 0, 1e-6, 1e-6]


@pytest.mark.parametrize('hw', [(225, 337), (32, 32), (33, 97), (41, 37)])
def test_odd_input_sizes(hw):
    model = EVT('evt-test').eval()
    with torch.no_grad():
        outs = model(torch.randn(2, 3, *hw))
    h, w = hw
    for i, o in enumerate(outs):
        s = 2 ** (i + 2)
        assert o.shape[-2:] == (-(-h // s), -(-w // s))
        assert torch.isfinite(o).all()


def test_out_indices_and_out_norms():
    model = EVT('evt-test', out_indices=(1, -1))
    assert model.out_indices == (1, 3)
    assert hasattr(model, 'norm1') and hasattr(model, 'norm3') and not hasattr(model, 'norm0')
    outs = model(torch.randn(1, 3, 64, 64))
    assert [o.shape[1] for o in outs] == [32, 128]
    raw = EVT('evt-test', out_indices=(3, ), out_norm_cfg=None)
    assert isinstance(raw.norm3, nn.Identity)


def _trainable(model, prefix):
    return [n for n, p in model.named_parameters() if n.startswith(prefix) and p.requires_grad]


@pytest.mark.parametrize('frozen', [-1, 0, 1, 2, 4])
def test_frozen_stages(frozen):
    model = EVT('evt-test', frozen_stages=frozen)
    model.train()
    assert bool(_trainable(model, 'stem')) == (frozen < 0)
    for i in range(4):
        is_frozen = i < frozen
        assert bool(_trainable(model, f'stages.{i}.')) != is_frozen
        assert bool(_trainable(model, f'norm{i}.')) != is_frozen
        assert model.stages[i].training != is_frozen
    if frozen >= 0:
        assert not model.stem[0].norm.training  # frozen BN stays in eval under train()


def test_norm_eval_keeps_batchnorm_in_eval():
    model = EVT('evt-test', norm_eval=True).train()
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns)
    assert model.stages[0].blocks[0].training


def test_with_cp_gives_identical_outputs_and_gradients():
    torch.manual_seed(0)
    a = EVT('evt-test', drop_path_rate=0.)
    b = EVT('evt-test', drop_path_rate=0., with_cp=True)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 3, 64, 80)
    outs = []
    for m in (a, b):
        m.train()
        y = m(x)
        probe_loss(y).backward()
        outs.append((y, {n: p.grad.clone() for n, p in m.named_parameters()}))
    for ya, yb in zip(outs[0][0], outs[1][0]):
        torch.testing.assert_close(ya, yb)
    grads = outs[0][1]
    assert sum(g.abs().max() > 1e-2 for g in grads.values()) > len(grads) // 2  # not ~0
    for n, g in grads.items():
        torch.testing.assert_close(outs[1][1][n], g, msg=n)


# every attention path with a backward pass on CPU (Flex has none here: its gradients are
# the GPU checks'), on EVT's grouped layouts and RMT's decomposed one with layer scale
@pytest.mark.parametrize('arch,impl', [('evt-test', 'reference'), ('evt-test', 'sdpa'),
                                       ('rmt-test', 'reference'), ('rmt-test', 'sdpa')])
def test_recompute_saves_less_and_keeps_the_gradients(arch, impl):
    from mmevt.analysis.memory import saved_tensor_bytes
    torch.manual_seed(0)
    plain = EVT(arch, attn_impl=impl, drop_path_rate=0., layer_cfgs=dict(recompute=False))
    lean = EVT(arch, attn_impl=impl, drop_path_rate=0.)  # recompute: the default
    lean.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 64, 80)
    runs = []
    for m in (plain, lean):
        y = m.train()(x)
        probe_loss(y).backward()
        runs.append((y, {n: p.grad for n, p in m.named_parameters()}))
    for a, b in zip(runs[0][0], runs[1][0]):
        torch.testing.assert_close(b, a)
    grads = runs[0][1]
    scale = max(g.abs().max().item() for g in grads.values())
    for n, g in grads.items():  # to rounding, relative to the gradients' scale
        torch.testing.assert_close(runs[1][1][n], g, rtol=1e-4, atol=1e-5 * scale, msg=n)
    saved = [saved_tensor_bytes(m, x).total for m in (plain, lean)]
    assert saved[1] < 0.8 * saved[0], saved


def test_backward_reaches_every_parameter():
    model = EVT('rmt-test')
    probe_loss(model(torch.randn(2, 3, 48, 64))).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    assert not missing


def test_attn_impls_agree_inside_the_backbone():
    torch.manual_seed(0)
    ref = EVT('evt-test', attn_impl='reference').eval()
    x = torch.randn(1, 3, 70, 90)
    with torch.no_grad():
        expected = ref(x)
        for impl in ['sdpa'] + (['flex'] if flex_available() else []):
            fast = EVT('evt-test', attn_impl=impl).eval()
            fast.load_state_dict(ref.state_dict())
            for a, b in zip(fast(x), expected):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_torch_compile_traces_the_whole_backbone():
    # fullgraph: einops layouts, the per-grid cache and the path log trace without a break.
    # Graph breaks are dynamo's, whatever the backend: aot_eager (dynamo + AOT autograd)
    # skips inductor's C++ build (14 s -> a few on 2 cores); the GPU script compiles with
    # inductor (tools/analysis/gpu_checks.py)
    torch._dynamo.reset()
    model = EVT('rmt-test', mixers=['group_dilate', 'window_grid', 'decomposed', 'full'],
                group_sizes=[16, 16, 4, 16]).eval()
    x = torch.randn(1, 3, 64, 80)
    with torch.no_grad():
        expected = model(x)
        got = torch.compile(model, fullgraph=True, backend='aot_eager')(x)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_attention_paths_are_logged_once_per_model_and_situation(caplog):
    model = EVT('evt-test', mixers=['group_dilate', 'routing', 'decomposed', 'full']).eval()
    with caplog.at_level(logging.INFO, logger='mmevt'), torch.no_grad():
        for _ in range(3):
            model(torch.randn(1, 3, 64, 64))
        EVT('evt-test', attn_impl='reference').eval()(torch.randn(1, 3, 64, 64))
    lines = [r.getMessage() for r in caplog.records if r.name == 'mmevt']
    assert lines == [
        "EVT attention paths on cpu (attn_impl='auto'), per stage: 0: sdpa; 1: other mixer; "
        '2: sdpa; 3: sdpa',
        "EVT attention paths on cpu (attn_impl='reference'), per stage: 0: reference; "
        '1: reference; 2: reference; 3: reference']


def test_the_log_says_what_torch_compile_would_run_where_it_differs(caplog, monkeypatch):
    from mmevt.ops import ATTN_PATHS
    # a table where Flex is what 'auto' picks when compiled, on this device too
    monkeypatch.setitem(ATTN_PATHS, 'flex', ATTN_PATHS['flex']._replace(
        auto=lambda device, head_dim, compiling: compiling))
    model = EVT('evt-test', mixers=['group_dilate', 'routing', 'decomposed', 'full']).eval()
    with caplog.at_level(logging.INFO, logger='mmevt'), torch.no_grad():
        model(torch.randn(1, 3, 64, 64))
    (line, ) = [r.getMessage() for r in caplog.records if r.name == 'mmevt']
    assert line.endswith('per stage: 0: sdpa; 1: other mixer; 2: sdpa; 3: sdpa; under '
                         'torch.compile: 0: flex; 1: other mixer; 2: sdpa; 3: flex'), line


def test_a_compiled_model_compiles_once(caplog):
    # The per-stage table cache and the path log are Python state: touched while dynamo
    # traces, they became guards that failed on the second call (every model compiled
    # twice; an EVT-S trace is 25-48 s on a 2-core CPU, docs/benchmark.md).
    import torch._dynamo
    torch._dynamo.reset()
    model = EVT('evt-test').eval()
    compiled = torch.compile(model, backend='eager')
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger='mmevt'), \
            torch._dynamo.config.patch(error_on_recompile=True):
        first = compiled(x)
        for a, b in zip(compiled(x), first):
            torch.testing.assert_close(a, b)
        for a, b in zip(model(x), first):  # eager fills the cache; compiled reads it
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        compiled(x)
    assert [r.getMessage() for r in caplog.records if r.name == 'mmevt'] == [
        "EVT attention paths on cpu (attn_impl='auto'), per stage: 0: sdpa; 1: sdpa; "
        '2: sdpa; 3: sdpa']  # the eager call's; nothing while tracing


def test_layer_cfgs_pass_options_through_to_every_block_and_mixer():
    mixers = ['group_dilate', dict(type='routing', n_win=2, topk=2),
              dict(type='external', memory_size=8), 'decomposed']
    model = EVT('evt-test', mixers=mixers, layer_cfgs=dict(attn_drop_rate=0.1))
    assert all(blk.attn.attn_drop_rate == 0.1 for st in model.stages for blk in st.blocks
               if not hasattr(blk.attn, 'attn_drop'))
    assert model.stages[2].blocks[0].attn.attn_drop.p == 0.1  # external attention
    per_stage = EVT('evt-test', mixers=mixers, layer_cfgs=[
        dict(attn_drop_rate=0.2), dict(qk_scale=0.5), dict(eps=1e-6), {}])
    assert per_stage.stages[0].blocks[0].attn.attn_drop_rate == 0.2
    assert per_stage.stages[1].blocks[0].attn.scale == 0.5
    assert per_stage.stages[2].blocks[0].attn.eps == 1e-6
    assert per_stage.stages[3].blocks[0].attn.attn_drop_rate == 0.
    assert list(model.state_dict()) == list(EVT('evt-test', mixers=mixers).state_dict())
    with pytest.raises(ValueError, match=r"layer_cfgs\[1\] has keys \['memory_size'\] .*"
                                         r"mixer 'routing'.*allowed: .*'topk'"):
        EVT('evt-test', mixers=mixers, layer_cfgs=[{}, dict(memory_size=4), {}, {}])


def test_a_block_option_is_one_keyword_where_it_is_consumed(monkeypatch):
    # what a contributor adds: a keyword of EVTBlock; EVT passes it through unchanged
    import mmevt.models.backbones.evt as evt_module

    class BlockWithOption(evt_module.EVTBlock):

        def __init__(self, *args, new_option: float = 0., **kwargs):
            super().__init__(*args, **kwargs)
            self.new_option = new_option

    monkeypatch.setattr(evt_module, 'EVTBlock', BlockWithOption)
    model = EVT('evt-test', layer_cfgs=[dict(new_option=1.5), {}, {}, {}])
    assert model.stages[0].blocks[0].new_option == 1.5
    assert model.stages[1].blocks[0].new_option == 0.


def test_attention_dropout_is_train_only():
    torch.manual_seed(0)
    plain = EVT('evt-test')
    dropping = EVT('evt-test', layer_cfgs=dict(attn_drop_rate=0.3))
    dropping.load_state_dict(plain.state_dict())  # same keys: dropout has no weights
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(plain.eval()(x), dropping.eval()(x)):
            torch.testing.assert_close(a, b)  # eval: deterministic, as without dropout
        plain.train(), dropping.train()
        ref, first, second = plain(x), dropping(x), dropping(x)
    torch.testing.assert_close(plain(x)[3], ref[3])  # without dropout training is repeatable
    assert all(not torch.allclose(a, b) for a, b in zip(first, second))
    assert all(not torch.allclose(a, b) for a, b in zip(first, ref))


@pytest.mark.parametrize('impl', [n for n, p in ATTN_PATHS.items()
                                  if p.dropout and p.missing() is None])
def test_attention_dropout_applies_on_every_path_that_supports_it(impl):
    torch.manual_seed(0)
    attn = SpatialDecayAttention(16, 2, mode='group', group_size=4, attn_impl=impl,
                                 attn_drop_rate=0.5)
    x = torch.randn(1, 3, 4, 16)
    assert attn.train().resolved_impl(x.device) == impl
    assert not torch.allclose(attn(x), attn(x))
    attn.eval()
    torch.testing.assert_close(attn(x), attn(x))


def test_auto_with_attention_dropout_never_runs_flex(monkeypatch):
    attn = SpatialDecayAttention(32, 2, mode='group', group_size=4, attn_drop_rate=0.1)
    cuda = torch.device('cuda')
    monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: True)
    assert attn.train().resolved_impl(cuda) == 'sdpa'
    assert attn.eval().resolved_impl(cuda) == ('flex' if flex_available() else 'sdpa')


def test_renamed_arguments_keep_their_old_names_for_a_release():
    new = EVT('evt-test', group_sizes=[9, 16, 16, 4], layer_scales=0.5)
    with pytest.warns(FutureWarning, match=r'EVT: group_size= is deprecated .* group_sizes='):
        old = EVT('evt-test', group_size=[9, 16, 16, 4], layer_scales=0.5)
    with pytest.warns(FutureWarning, match=r'EVT: layer_scale= is deprecated'):
        old2 = EVT('evt-test', group_sizes=[9, 16, 16, 4], layer_scale=0.5)
    assert new.arch_settings == old.arch_settings == old2.arch_settings
    assert new.arch_settings['layer_scales'] == [0.5] * 4
    assert list(new.state_dict()) == list(old2.state_dict())
    with pytest.raises(ValueError, match=r'pass group_sizes= only .* got both'):
        EVT('evt-test', group_size=16, group_sizes=16)


def test_decay_rates_are_not_checkpointed_and_follow_arch():
    model = EVT('rmt-test')
    attn = model.stages[2].blocks[0].attn
    assert 'stages.2.blocks.0.attn.log_gamma' not in model.state_dict()
    assert attn.log_gamma.shape == (4, )
    # blocks of a stage share one bias cache
    assert model.stages[1].blocks[0].attn.cache is model.stages[1].blocks[1].attn.cache


def test_layer_depth_for_lr_decay():
    model = EVT('evt-test')
    total = sum(model.arch_settings['depths']) + 2
    assert model.get_layer_depth('backbone.stem.0.conv.weight', 'backbone.') == (0, total)
    assert model.get_layer_depth('backbone.stages.0.blocks.0.attn.q.weight', 'backbone.')[0] == 1
    assert model.get_layer_depth('backbone.stages.2.blocks.1.ffn.fc1.weight', 'backbone.')[0] == 4
    assert model.get_layer_depth('backbone.norm3.weight', 'backbone.')[0] == total - 1
    assert model.get_layer_depth('head.fc.weight', 'backbone.')[0] == total - 1


# ---------------------------------------------------------------- bad arguments
@pytest.mark.parametrize('kwargs,match', [
    (dict(arch='evt-xl'), r"arch 'evt-xl' is not known; choose one of .*'evt-t'"),
    (dict(arch=dict(embed_dims=[8, 16], num_heads=[1, 2])), r"missing required keys \['depths'\]"),
    (dict(arch=dict(embed_dims=[8], depths=[1], num_heads=[1], window=7)),
     r"unknown keys \['window'\]"),
    (dict(arch=dict(embed_dims=[8, 16], depths=[1], num_heads=[1, 2])),
     r'embed_dims needs one value per stage \(1\), got 2'),
    (dict(arch=dict(embed_dims=[16, 30], depths=[1, 1], num_heads=[2, 4])),
     r'num_heads\[1\]=4 must be a positive int dividing embed_dims\[1\]=30'),
    (dict(group_sizes=0), r'group_sizes\[0\] must be a positive int, got 0'),
    (dict(group_sizes=[16, 16, -3, 16]), r'group_sizes\[2\] must be a positive int, got -3'),
    (dict(group_sizes=[16, 16]), r'group_sizes needs one value per stage \(4\), got 2'),
    (dict(mixers=['full', 'full', 'windows', 'full']),
     re.escape(f'mixers[2] must be one of {list(MIXERS)} (or a dict with such a '
               "'type'), got 'windows'")),
    (dict(mixers=['window_grid'] * 3 + ['full'], group_sizes=[16, 16, 50, 16]),
     r"group_sizes\[2\]=50 must be a square .* for mixers\[2\]='window_grid'"),
    (dict(decay='chebyshev'), r"decay must be one of \['euclidean', 'manhattan', 'none'\]"),
    (dict(out_indices=(0, 4)), r'out_indices entries must be ints in \[-4, 3\], got 4'),
    (dict(frozen_stages=5), r'frozen_stages must be an int in \[-1, 4\], got 5'),
    (dict(frozen_stages=-2), r'frozen_stages must be an int in \[-1, 4\], got -2'),
    (dict(norm_cfg=dict(type='FancyNorm')), r"norm_cfg type must be one of .*got 'FancyNorm'"),
    (dict(attn_impl='triton'), r"attn_impl must be one of .*got 'triton'"),
    (dict(drop_path_rate=1.5), r'drop_path_rate must be in \[0, 1\), got 1.5'),
    (dict(layer_cfgs=dict(attn_drop=0.1)),
     r"layer_cfgs\[0\] has keys \['attn_drop'\] that no module of stage 0 takes .*allowed: "
     + re.escape(str(layer_cfg_keys(resolve_arch('evt-test')['mixers'][0])))),
    (dict(layer_cfgs=dict(group_size=8)), r"keys \['group_size'\] .*the arch and EVT "
                                          r'arguments set the others'),
    (dict(layer_cfgs=[dict()] * 3), r'layer_cfgs must be a dict or a list of 4 dicts'),
    (dict(layer_cfgs=dict(attn_drop_rate=1.0)), r'attn_drop_rate must be in \[0, 1\), got 1.0'),
    (dict(attn_impl='flex', layer_cfgs=dict(attn_drop_rate=0.1)),
     r"attn_impl='flex' cannot apply attention dropout \(attn_drop_rate=0.1\)"),
])
def test_bad_arguments_raise_clear_value_errors(kwargs, match):
    kwargs = {'arch': 'evt-test', **kwargs}
    with pytest.raises(ValueError, match=match):
        EVT(**kwargs)


def test_bad_inputs_raise_clear_value_errors():
    model = EVT('evt-test')
    with pytest.raises(ValueError, match=r'needs H, W >= 32 .*got \(31, 64\)'):
        model(torch.randn(1, 3, 31, 64))
    with pytest.raises(ValueError,
                       match=r'expects input of shape \(B, 3, H, W\), got \(1, 4, 64, 64\)'):
        model(torch.randn(1, 4, 64, 64))


def test_missing_pretrained_checkpoint_names_the_config_key(tmp_path):
    missing = str(tmp_path / 'nope.pth')
    model = EVT('evt-test', init_cfg=dict(type='Pretrained', checkpoint=missing))
    with pytest.raises(FileNotFoundError, match=r'init_cfg.checkpoint .*nope.pth'):
        model.init_weights()


def test_pretrained_init_cfg_loads_weights_with_and_without_prefix(tmp_path):
    src = EVT('evt-test')
    src.init_weights()
    bare = tmp_path / 'bare.pth'
    prefixed = tmp_path / 'full.pth'
    torch.save({'state_dict': src.state_dict()}, bare)
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in src.state_dict().items()}},
               prefixed)
    for path, prefix in ((bare, None), (prefixed, 'backbone.')):
        cfg = dict(type='Pretrained', checkpoint=str(path))
        if prefix:
            cfg['prefix'] = prefix
        dst = EVT('evt-test', init_cfg=cfg)
        dst.init_weights()
        for k, v in src.state_dict().items():
            torch.testing.assert_close(dst.state_dict()[k], v, msg=k)


def test_pretrained_mismatches_are_reported_or_refused(tmp_path, monkeypatch):
    src = EVT('evt-test').state_dict()
    # wrong arch: shapes differ -> error naming a key and both shapes
    other = tmp_path / 'other.pth'
    narrow = dict(embed_dims=[8, 16, 32, 64], depths=[1, 1, 2, 1], num_heads=[1, 2, 4, 4])
    torch.save({'state_dict': EVT(narrow).state_dict()}, other)
    with pytest.raises(ValueError, match=r'wrong shape for this EVT arch, e\.g\. .*checkpoint '
                                         r'\(\d+.*\) vs model'):
        EVT('evt-test', init_cfg=dict(type='Pretrained', checkpoint=str(other))).init_weights()
    # keys with an unexpected prefix -> nothing matches -> error suggesting the prefix
    prefixed = tmp_path / 'prefixed.pth'
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in src.items()}}, prefixed)
    with pytest.raises(ValueError, match=r"none of its .* tensors .* set init_cfg.prefix"):
        EVT('evt-test', init_cfg=dict(type='Pretrained', checkpoint=str(prefixed))).init_weights()
    # a partial checkpoint loads what it has and lists what is missing / unexpected
    partial = tmp_path / 'partial.pth'
    keep = {k: v for k, v in src.items() if not k.startswith('norm')}
    keep['extra.weight'] = torch.zeros(1)
    torch.save({'state_dict': keep}, partial)
    import mmengine.logging
    logged = []
    monkeypatch.setattr(mmengine.logging, 'print_log', lambda msg, **kw: logged.append(msg))
    m = EVT('evt-test', init_cfg=dict(type='Pretrained', checkpoint=str(partial)))
    m.init_weights()
    assert len(logged) == 1
    assert "missing (kept at init): ['norm0.weight', 'norm0.bias'" in logged[0]
    assert "unexpected (ignored): ['extra.weight']" in logged[0]
    torch.testing.assert_close(m.state_dict()['stem.0.conv.weight'], src['stem.0.conv.weight'])


def test_truncated_checkpoint_is_a_clear_error(tmp_path):
    good = tmp_path / 'good.pth'
    torch.save({'state_dict': EVT('evt-test').state_dict()}, good)
    bad = tmp_path / 'truncated.pth'
    bad.write_bytes(good.read_bytes()[:5000])
    with pytest.raises(ValueError, match=r'truncated or not a PyTorch checkpoint'):
        EVT('evt-test', init_cfg=dict(type='Pretrained', checkpoint=str(bad))).init_weights()
