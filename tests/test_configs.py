"""Every config in configs/ parses, loads the plugin, and builds a consistent model."""
import glob
import re
import os.path as osp

import pytest

from helpers import CONFIGS, load_config, refused_where_missing, upstream_only_toolkit
from mmevt.toolkits import TOOLKITS

# configs/*/_base_/ hold shared recipe pieces (e.g. the 3x ms-crop pipeline), not models;
# configs/deploy/ holds mmdeploy configs, not models (tests/test_deploy.py checks them)
DEPLOY = osp.join(CONFIGS, 'deploy') + osp.sep
ALL = sorted(p for p in glob.glob(osp.join(CONFIGS, '**', '*.py'), recursive=True)
             if '_base_' not in p and not p.startswith(DEPLOY))
BASES = sorted(p for p in glob.glob(osp.join(CONFIGS, '*', '_base_', '*.py'))
               if not p.startswith(DEPLOY))



def test_shared_recipe_pieces_are_used():
    assert BASES, 'configs/det/_base_/ms-crop-3x_coco-instance.py is missing'
    for base in BASES:
        rel = osp.relpath(base, osp.dirname(osp.dirname(base)))  # _base_/<file>
        users = [p for p in ALL if rel in open(p).read()]
        assert users, f'{base} is used by no config'


def _registry(scope):
    import importlib
    return importlib.import_module(f'{scope}.registry').MODELS


@pytest.mark.parametrize('path', ALL, ids=[osp.relpath(p, CONFIGS) for p in ALL])
def test_config_builds_and_channels_match(path):
    # mmpose's and mmaction2's configs: on the fork (no fork of either) the config says
    # what it needs when loaded
    toolkit = upstream_only_toolkit(path)
    if toolkit and refused_where_missing(toolkit, path):
        return
    cfg = load_config(path)
    assert cfg.custom_imports == dict(imports=['mmevt'], allow_failed_imports=False)
    assert cfg.default_scope in TOOLKITS
    # nothing may point at the network (no downloads here)
    assert '://' not in repr(cfg.to_dict())
    import torch
    from mmengine.registry import DefaultScope
    # shapes only (the meta device): building the large models' weights on the CPU would
    # take most of this test's time
    with DefaultScope.overwrite_default_scope(cfg.default_scope), torch.device('meta'):
        model = _registry(cfg.default_scope).build(cfg.model)
    backbone = model.backbone
    assert type(backbone).__name__ == 'EVT'
    dims = [backbone.embed_dims[i] for i in backbone.out_indices]
    if cfg.default_scope == 'mmpretrain':
        if hasattr(model.neck, 'proj'):  # the authors' RMT head
            assert model.neck.proj.in_features == dims[-1]
        else:  # Swin's: pooling + linear
            assert model.head.fc.in_features == dims[-1]
    elif cfg.default_scope == 'mmpose':  # a top-down head on the last map read
        assert cfg.model.head.in_channels == dims[-1]
    elif cfg.default_scope == 'mmaction':  # TSN's head pools the one map read
        assert dims == dims[-1:] and cfg.model.cls_head.in_channels == dims[-1]
    elif cfg.model.type == 'EncoderDecoder' and cfg.model.decode_head.type == 'UPerHead':
        assert list(cfg.model.decode_head.in_channels) == dims
        assert cfg.model.auxiliary_head.in_channels == dims[cfg.model.auxiliary_head.in_index]
    else:
        assert list(cfg.model.neck.in_channels) == dims
    # the file name names the backbone it builds (OpenMMLab naming)
    arch = cfg.model.backbone.arch
    if not isinstance(arch, str):  # the demo's custom arch: named 'evt-demo' in the file name
        assert '_evt-demo_' in osp.basename(path) and 'demo' in path
        return
    # (classification configs may add a variant: rmt-s-tl_* is the token-labelled RMT-S)
    assert (f'_{arch}_' in osp.basename(path)
            or re.match(rf'{re.escape(arch)}(-[a-z]+)?_', osp.basename(path)))
    if cfg.get('load_from'):
        assert cfg.load_from == f'checkpoints/{arch}_in1k.pth'
    init = cfg.model.backbone.get('init_cfg')
    if init is None and osp.dirname(path) == osp.join(CONFIGS, 'demo'):
        return  # a demo on generated data, trained from scratch (e.g. the pose demo)
    if cfg.default_scope != 'mmpretrain':
        assert init['type'] == 'Pretrained'
        assert init['checkpoint'] == f'checkpoints/{arch}_in1k.pth'
