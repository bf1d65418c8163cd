"""mmevt.timm: the registration seen from timm's side, the model contract, checkpoints of the
toolkits and of the converter loaded through ``timm.create_model(pretrained=True)``, and the
consumers (mmpretrain's ``TIMMBackbone``, timm's optimizer factory with layer decay).
timm's own ``test_models.py`` on these models: ``test_timm_suite.py``."""
import logging
import os.path as osp

import pytest
import torch
from helpers import CONFIGS, run_tool
from rmt_reference import authors_state_dict, rmt_reference_logits

import timm  # requirements/tests.txt

import mmevt.timm
from mmevt.timm import TIMM_NAMES, EVTClassifier, checkpoint_filter_fn, timm_name

EXPECTED_NAMES = {
    'evt_tiny': 'evt-t', 'evt_small': 'evt-s', 'evt_base': 'evt-b', 'evt_large': 'evt-l',
    'evt_swin_tiny': 'evt-swin-t', 'evt_swin_small': 'evt-swin-s',
    'evt_swin_base': 'evt-swin-b', 'rmt_tiny': 'rmt-t', 'rmt_small': 'rmt-s',
    'rmt_base': 'rmt-b', 'rmt_large': 'rmt-l'}

# what timm lists and how it builds every model, before and after our registration
TIMM_SIDE = r'''
import sys, json, timm
from timm.models import get_pretrained_cfg
def snapshot():
    return dict(models=timm.list_models(), pretrained=timm.list_pretrained(),
                modules=sorted(timm.list_modules()),
                cfgs={n: get_pretrained_cfg(n).to_dict() for n in timm.list_pretrained()},
                entry={n: timm.models.model_entrypoint(n).__module__ for n in timm.list_models()})
before = snapshot()
import mmevt
assert timm.list_models('evt*') == [] and timm.list_models('rmt*') == []
import mmevt.timm
after = snapshot()
new = sorted(set(after['models']) - set(before['models']))
assert set(before['models']) <= set(after['models'])
assert after['pretrained'] == before['pretrained']  # no weights hosted: nothing new
assert sorted(set(after['modules']) - set(before['modules'])) == ['evt'], after['modules']
assert {n: after['entry'][n] for n in before['models']} == before['entry']
assert after['cfgs'] == before['cfgs']
print(json.dumps(dict(new=new, evt=timm.list_models('evt*'), rmt=timm.list_models('rmt*'),
                      module=timm.list_models(module='evt'))))
'''
WITHOUT_TIMM = r'''
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] == 'timm':
            raise ModuleNotFoundError(f'blocked {name}', name=name)
sys.meta_path.insert(0, Block())
import torch, mmevt
from mmevt.models import EVT
assert len(EVT('evt-test')(torch.randn(1, 3, 64, 64))) == 4
try:
    import mmevt.timm
except ImportError as err:
    print('REFUSED', err)
'''


@pytest.mark.e2e
def test_registration_changes_nothing_else_in_timm():
    import json
    out = json.loads(run_tool('-c', TIMM_SIDE).strip().splitlines()[-1])
    assert out['new'] == sorted(EXPECTED_NAMES)
    assert out['module'] == sorted(EXPECTED_NAMES)
    assert out['evt'] == sorted(n for n in EXPECTED_NAMES if n.startswith('evt'))
    assert out['rmt'] == sorted(n for n in EXPECTED_NAMES if n.startswith('rmt'))


@pytest.mark.e2e
def test_mmevt_works_without_timm_and_import_mmevt_never_imports_it():
    out = run_tool('-c', WITHOUT_TIMM)
    assert 'REFUSED mmevt.timm registers EVT with timm, which is not installed: pip install ' \
           '"mmevt[timm]"' in out
    out = run_tool('-c', 'import sys, mmevt; print("TIMM", "timm" in sys.modules)')
    assert 'TIMM False' in out


def test_names_follow_the_zoo():
    from mmevt.models.backbones.archs import ARCH_FAMILIES
    assert TIMM_NAMES == EXPECTED_NAMES
    zoo = {a for f in ('evt', 'evt-swin', 'rmt') for a in ARCH_FAMILIES[f]}
    assert set(TIMM_NAMES.values()) == zoo  # every arch of the three families, once
    from mmevt.timm import evt  # an entrypoint written out for each name, as timm's models
    assert all(getattr(evt, name).__name__ == name for name in TIMM_NAMES)
    assert timm_name('EVT-Tiny') == 'evt_tiny' and timm_name('evt-swin-b') == 'evt_swin_base'
    with pytest.raises(ValueError, match="arch 'evt-test' is not registered with timm"):
        timm_name('evt-test')
    with pytest.raises(ValueError, match="arch 'evt-x' is not known"):
        timm_name('evt-x')


@pytest.mark.parametrize('name', ['evt_tiny', 'evt_swin_tiny', 'rmt_tiny'])
def test_model_contract(name):
    model = timm.create_model(name, num_classes=7).eval()
    cfg = model.pretrained_cfg
    assert cfg['input_size'] == (3, 224, 224) and cfg['min_input_size'] == (3, 32, 32)
    assert (cfg['crop_pct'], cfg['interpolation'], cfg['classifier']) == (0.875, 'bicubic',
                                                                          'head.fc')
    assert cfg['mean'] == (0.485, 0.456, 0.406) and cfg['license'] == 'apache-2.0'
    assert cfg['paper_ids'] == ('arXiv:2309.11523' if name.startswith('rmt') else
                                'arXiv:2604.18549')
    assert cfg['first_conv'] + '.weight' in model.state_dict()
    assert isinstance(model.backbone, mmevt.EVT)  # one model for both registrations
    dims = model.backbone.embed_dims
    assert model.feature_info == [dict(num_chs=c, reduction=4 * 2 ** i,
                                       module=f'backbone.stages.{i}') for i, c in enumerate(dims)]
    x = torch.randn(2, 3, 33, 47)  # odd sizes: maps rounded up
    with torch.no_grad():
        feats = model.forward_features(x)
        assert feats.shape == (2, model.num_features, 2, 2)
        assert model(x).shape == (2, 7)
        pre = model.forward_head(feats, pre_logits=True)
        assert pre.shape == (2, model.head_hidden_size)
        torch.testing.assert_close(model.get_classifier()(pre), model(x))
        inter = model.forward_intermediates(x, indices=[0, -1], intermediates_only=True)
        assert [t.shape[1:] for t in inter] == [(dims[0], 9, 12), (dims[-1], 2, 2)]
        # the toolkit backbone's own forward gives the same stage maps
        model.backbone.out_indices = (0, 3)
        model.backbone.add_module('norm0', torch.nn.Identity())  # stage 0 raw, as above
        if model.neck is None:  # EVT-Swin: its out norm is the final norm, on the last map
            inter[-1] = model.forward_intermediates(x, indices=[-1], norm=True,
                                                    intermediates_only=True)[0]
        for a, b in zip(model.backbone(x), inter):
            torch.testing.assert_close(a, b)
    model.reset_classifier(0, '')
    assert model.get_classifier().__class__.__name__ == 'Identity'
    with torch.no_grad():
        assert model(x).shape == (2, model.num_features, 2, 2)
    model.set_grad_checkpointing()
    assert all(s.with_cp for s in model.backbone.stages)
    with pytest.raises(ValueError, match="output_fmt must be 'NCHW', got 'NHWC'"):
        model.forward_intermediates(x, output_fmt='NHWC')
    with pytest.raises(ValueError, match=r'EVT needs H, W >= 32'):
        model(torch.randn(1, 3, 31, 64))
    with pytest.raises(TypeError):
        timm.create_model(name, not_an_argument=1)


def test_features_only_and_factory_arguments():
    model = timm.create_model('rmt_tiny', features_only=True, out_indices=(1, 3))
    assert model.feature_info.channels() == [128, 512]
    assert model.feature_info.reduction() == [8, 32]
    assert model.model.neck is None and model.model.num_classes == 0  # pruned: no unused
    outs = model(torch.randn(1, 3, 64, 96))
    assert [tuple(o.shape) for o in outs] == [(1, 128, 8, 12), (1, 512, 2, 3)]
    meta = timm.create_model('evt_tiny', device='meta', dtype=torch.float64)
    assert {(p.device.type, p.dtype) for p in meta.parameters()} == {('meta', torch.float64)}
    with pytest.raises(ValueError, match='num_classes must be an int >= 0, got -1'):
        EVTClassifier('evt-t', num_classes=-1)


def _classifier(config: str, num_classes: int = 10):
    """mmpretrain's classifier of one of our configs (the toolkit path), initialised."""
    from mmengine.config import Config
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(osp.join(CONFIGS, 'cls', config))
    cfg.model.head.num_classes = num_classes
    cfg.model.pop('train_cfg', None)
    model = MODELS.build(cfg.model)
    model.init_weights()
    with torch.no_grad():  # BN statistics that are not the identity
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-.1, .1)
                m.running_var.uniform_(.5, 2.)
    return model.eval()


@pytest.mark.parametrize('name,config', [('evt_tiny', 'evt/evt-t_8xb128_in1k.py'),
                                         ('evt_swin_tiny', 'evt-swin/evt-swin-t_16xb64_in1k.py')])
def test_toolkit_checkpoint_gives_the_toolkit_outputs(name, config, tmp_path, caplog):
    toolkit = _classifier(config)
    path = str(tmp_path / 'epoch_1.pth')  # a runner's layout, with its metadata
    torch.save(dict(meta=dict(epoch=1, mmengine_version='0.10.7'),
                    state_dict=toolkit.state_dict(), message_hub=dict(log_scalars={})), path)
    model = timm.create_model(name, pretrained=True, num_classes=10,
                              pretrained_cfg_overlay=dict(file=path, num_classes=10)).eval()
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        torch.testing.assert_close(model(x), toolkit(x, mode='tensor'))
    # backbone-only keys (a backbone checkpoint): the backbone loads, the head stays at init
    torch.save(toolkit.backbone.state_dict(), tmp_path / 'backbone.pth')
    with caplog.at_level(logging.WARNING, logger='mmevt.timm.evt'):
        model = timm.create_model(
            name, pretrained=True, pretrained_cfg_overlay=dict(file=str(tmp_path / 'backbone.pth')))
    assert 'kept at their initial values' in caplog.text and 'head.fc.weight' in caplog.text
    for k, v in toolkit.backbone.state_dict().items():
        assert torch.equal(model.backbone.state_dict()[k], v), k
    # a classifier of another class count: dropped with a warning naming the fix
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger='mmevt.timm.evt'):
        timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=path))
    assert "head.fc.weight (10," in caplog.text and 'pass num_classes=N' in caplog.text


def test_converted_rmt_checkpoint_reproduces_the_authors_logits(tmp_path):
    from mmevt.converters import convert_checkpoint
    rmt_t = dict(embed_dims=[64, 128, 256, 512], depths=[2, 2, 8, 2], num_heads=[4, 4, 8, 16],
                 mlp_ratios=[3] * 4, layerscales=[False] * 4, init_values=[2] * 4,
                 heads_ranges=[4, 4, 6, 6])
    authors = authors_state_dict(**rmt_t, num_classes=10)
    state, meta, _ = convert_checkpoint(dict(model=authors))
    assert meta['arch'] == 'rmt-t'
    path = str(tmp_path / 'rmt-t_converted.pth')
    torch.save(dict(state_dict=state, meta=meta), path)
    model = timm.create_model('rmt_tiny', pretrained=True, num_classes=10,
                              pretrained_cfg_overlay=dict(file=path, num_classes=10)).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ours, ref = model(x), rmt_reference_logits(authors, x, (0, 1))
    scale = ref.abs().max().item()  # as test_converter: fp32 order differences scale
    torch.testing.assert_close(ours, ref, atol=1e-5 * scale, rtol=1e-4)
    # the authors' own file is refused, pointing at the converter
    torch.save(authors, tmp_path / 'authors.pth')
    with pytest.raises(ValueError, match="RMT authors' own checkpoints: convert it first"):
        timm.create_model('rmt_tiny', pretrained=True, num_classes=10, pretrained_cfg_overlay=dict(
            file=str(tmp_path / 'authors.pth'), num_classes=10))


class _Payload:
    def __reduce__(self):
        return (print, ('unpickled: code ran',))


def test_loading_is_safe_and_errors_name_the_problem(tmp_path, capsys):
    from safetensors.torch import save_file
    model = timm.create_model('evt_swin_tiny')
    evil = str(tmp_path / 'evil.pth')
    torch.save(dict(state_dict=model.state_dict(), extra=_Payload()), evil)
    with pytest.raises(Exception, match='weights_only=True blocked loading this checkpoint '
                       '.* Unsupported globals: builtins.print'):
        timm.create_model('evt_swin_tiny', pretrained=True,
                          pretrained_cfg_overlay=dict(file=evil))
    assert 'code ran' not in capsys.readouterr().out
    safe = str(tmp_path / 'w.safetensors')
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, safe)
    loaded = timm.create_model('evt_swin_tiny', pretrained=True,
                               pretrained_cfg_overlay=dict(file=safe))
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())
    other = timm.create_model('evt_swin_base', device='meta').state_dict()  # wider
    with pytest.raises(ValueError, match=r'a checkpoint of another arch\?'):
        checkpoint_filter_fn(other, model)
    with pytest.raises(ValueError, match='none of the checkpoint\'s 1 tensors'):
        checkpoint_filter_fn({'model.fc.weight': torch.zeros(2)}, model)


def test_timm_training_step_with_layer_decay():
    from timm.optim import create_optimizer_v2
    model = timm.create_model('evt_tiny', num_classes=5)
    opt = create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05, layer_decay=0.75)
    scales = sorted({g['lr_scale'] for g in opt.param_groups})
    depth = sum(model.backbone.arch_settings['depths'])
    # stem, one group per block (a stage's downsampling with its first), final layers
    assert len(scales) == depth + 2 and scales[-1] == 1.0
    assert scales[0] == pytest.approx(0.75 ** (depth + 1))
    stem = next(g for g in opt.param_groups if any(p is model.backbone.stem[0].conv.weight
                                                   for p in g['params']))
    assert stem['lr_scale'] == scales[0]
    # timm's groups agree with the toolkit's layer ids (mmevt's get_layer_depth)
    for name, p in model.named_parameters():
        if name.startswith('backbone.stages.'):
            layer, _ = model.backbone.get_layer_depth(name[len('backbone.'):])
            group = next(g for g in opt.param_groups if any(q is p for q in g['params']))
            assert group['lr_scale'] == pytest.approx(0.75 ** (depth + 1 - layer)), name
    before = model.backbone.stem[0].conv.weight.detach().clone()
    loss = torch.nn.functional.cross_entropy(model(torch.randn(2, 3, 64, 64)),
                                             torch.tensor([0, 3]))
    loss.backward()
    opt.step()
    assert not torch.equal(before, model.backbone.stem[0].conv.weight)


def test_mmpretrain_timm_backbone_trains():
    from mmengine.optim import OptimWrapper
    from mmpretrain.registry import MODELS
    from mmpretrain.structures import DataSample
    model = MODELS.build(dict(
        type='ImageClassifier',
        backbone=dict(type='TIMMBackbone', model_name='evt_swin_tiny', features_only=True,
                      out_indices=(2, 3)),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', num_classes=4, in_channels=768,
                  loss=dict(type='CrossEntropyLoss'))))
    model.init_weights()
    assert isinstance(model.backbone.timm_model.model, EVTClassifier)
    with torch.no_grad():
        feats = model.backbone(torch.randn(1, 3, 64, 64))
    assert [tuple(f.shape) for f in feats] == [(1, 384, 4, 4), (1, 768, 2, 2)]
    wrapper = OptimWrapper(torch.optim.AdamW(model.parameters(), lr=1e-3))
    data = dict(inputs=[torch.randint(0, 255, (3, 64, 64), dtype=torch.uint8)] * 2,
                data_samples=[DataSample().set_gt_label(1), DataSample().set_gt_label(2)])
    model.data_preprocessor = MODELS.build(dict(type='ClsDataPreprocessor'))
    weight = model.backbone.timm_model.model.backbone.stem.proj.weight
    before = weight.detach().clone()
    log = model.train_step(data, wrapper)
    assert torch.isfinite(log['loss']) and not torch.equal(before, weight)
