"""RMT checkpoint conversion: key round trip and logits against the authors' semantics."""
import os.path as osp

import pytest
import torch

from helpers import CONFIGS, run_tool
from rmt_reference import rmt_reference_logits


def _rmt_classifier(arch='rmt-test', num_classes=10):
    import mmevt  # noqa: F401
    from mmengine.config import Config
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(osp.join(CONFIGS, 'cls', 'rmt', 'rmt-t_8xb128_in1k.py'))
    cfg.model.backbone.arch = arch
    cfg.model.neck.in_channels = 128
    cfg.model.head.num_classes = num_classes
    cfg.model.pop('train_cfg')
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model.eval()


def _authors_state_dict(model):
    """An authors'-layout RMT state dict with random weights and BN statistics."""
    from mmevt.models.backbones.evt import arch_zoo
    from mmevt.utils.rmt_convert import convert_to_rmt
    torch.manual_seed(0)
    sd = {}
    for k, v in model.state_dict().items():
        if k.endswith('running_var'):
            v = torch.rand_like(v) + 0.5
        elif k.endswith('num_batches_tracked'):
            pass
        else:
            v = torch.randn_like(v) * (0.1 if v.dim() > 1 else 0.5)
        sd[k] = v
    authors = convert_to_rmt(sd)
    # the authors store per-stage decay rates and rotary angles as buffers
    arch = arch_zoo['rmt-test']
    for i, heads in enumerate(arch['num_heads']):
        authors[f'layers.{i}.Relpos.decay'] = torch.zeros(heads)
        authors[f'layers.{i}.Relpos.angle'] = torch.zeros(arch['embed_dims'][i] // heads)
    return authors


def test_key_round_trip_in_the_authors_layout():
    from mmevt.utils.rmt_convert import convert_rmt, convert_to_rmt
    model = _rmt_classifier()
    authors = _authors_state_dict(model)
    assert 'patch_embed.proj.10.running_var' in authors
    gamma = authors.get('layers.2.blocks.0.gamma_1')
    assert gamma is not None and gamma.dim() == 4
    assert 'layers.0.downsample.reduction.weight' in authors and 'head.weight' in authors
    ours = convert_rmt(authors)
    back = convert_to_rmt(ours)
    expected = {k: v for k, v in authors.items() if '.Relpos.' not in k}
    assert sorted(back) == sorted(expected)
    for k, v in expected.items():
        assert torch.equal(back[k], v), k
    # strict load: every key of the classifier is produced, nothing extra
    model.load_state_dict(ours, strict=True)


def test_converted_weights_reproduce_the_authors_logits():
    model = _rmt_classifier()
    authors = _authors_state_dict(model)
    from mmevt.utils.rmt_convert import convert_rmt
    model.load_state_dict(convert_rmt(authors), strict=True)
    x = torch.randn(2, 3, 96, 128)
    with torch.no_grad():
        ours = model(x, mode='tensor')
        ref = rmt_reference_logits(authors, x, num_heads=[1, 2, 4, 4],
                                   init_values=[2] * 4, heads_ranges=[4, 4, 6, 6],
                                   chunk_stages=(0, 1, 2))
    assert ours.shape == (2, 10)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)
    assert ref.abs().max() > 1e-2  # not a trivially small output


@pytest.mark.e2e
def test_converter_tool_classifier_and_backbone_only(tmp_path):
    model = _rmt_classifier()
    authors = _authors_state_dict(model)
    src = tmp_path / 'rmt_authors.pth'
    torch.save({'model': authors}, src)
    cls_ckpt, bb_ckpt = tmp_path / 'cls.pth', tmp_path / 'backbone.pth'
    run_tool('tools/model_converters/rmt_to_mmevt.py', str(src), str(cls_ckpt))
    run_tool('tools/model_converters/rmt_to_mmevt.py', str(src), str(bb_ckpt), '--backbone-only')
    # refuses to overwrite an existing file
    out = run_tool('tools/model_converters/rmt_to_mmevt.py', str(src), str(bb_ckpt), check=False)
    assert out.returncode != 0 and 'exists; pass --force' in out.stdout
    out = run_tool('tools/model_converters/rmt_to_mmevt.py', str(tmp_path / 'no.pth'),
                   str(tmp_path / 'x.pth'), check=False)
    assert out.returncode != 0 and "SRC checkpoint" in out.stdout
    from mmevt.models import EVT
    from mmevt.utils.rmt_convert import convert_rmt
    expected = {k[len('backbone.'):]: v for k, v in convert_rmt(authors).items()
                if k.startswith('backbone.')}
    for ckpt, prefix in ((cls_ckpt, 'backbone.'), (bb_ckpt, None)):
        init = dict(type='Pretrained', checkpoint=str(ckpt))
        if prefix:
            init['prefix'] = prefix
        backbone = EVT('rmt-test', init_cfg=init)
        before = backbone.state_dict()['stages.1.blocks.0.attn.q.weight'].clone()
        backbone.init_weights()
        after = backbone.state_dict()
        assert not torch.equal(after['stages.1.blocks.0.attn.q.weight'], before)
        for k, v in expected.items():
            assert torch.equal(after[k], v), k


def test_unknown_keys_are_reported():
    from mmevt.utils.rmt_convert import convert_rmt
    with pytest.raises(ValueError, match=r"not in the authors' RMT layout, e.g. \['pos_embed'\]"):
        convert_rmt({'pos_embed': torch.zeros(1)})
