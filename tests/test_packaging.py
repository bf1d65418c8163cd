"""mmevt added to a user's own OpenMMLab environment: the wheel carries the configs, tools and
model index (``mmevt/.mim``), ``mmevt::`` bases resolve from any directory, the console
commands run, and mmpretrain knows the EVT / RMT model names."""
import glob
import importlib.util
import json
import os
import os.path as osp
import re
import shutil
import subprocess
import sys
import zipfile

from importlib.metadata import version

import pytest
import torch
from packaging.requirements import Requirement

from helpers import (COPY_SKIP, CONFIGS, HANG_TIMEOUT, REPO, SEG_USER_CONFIG, load_tool,
                     tool_env)

OWN_ENV_DOC = osp.join(REPO, 'docs', 'own_environment.md')


def doc_blocks(lang: str):
    """The fenced ``lang`` blocks of docs/own_environment.md, the page these tests run."""
    with open(OWN_ENV_DOC) as f:
        return re.findall(rf'```{lang}\n(.*?)```', f.read(), flags=re.S)


def cls_config_names():
    return sorted(osp.splitext(osp.basename(p))[0]
                  for p in glob.glob(osp.join(CONFIGS, 'cls', '**', '*.py'), recursive=True)
                  if '_base_' not in p)


# ------------------------------------------------------------------ model names (in-process)
def test_the_model_zoo_is_the_tools_output_and_names_every_config_once():
    # metafiles, family READMEs, model-index.yml and docs/zoo.md: tools/misc/make_metafile.py
    from mmengine.fileio import load

    tool = load_tool('tools/misc/make_metafile.py')
    assert tool.stale(REPO) == [], 'run tools/misc/make_metafile.py'
    index = load(osp.join(REPO, 'model-index.yml'))['Import']
    families = sorted(glob.glob(osp.join(CONFIGS, '*', '*', '*.py')))
    family_dirs = {osp.dirname(p) for p in families
                   if osp.basename(osp.dirname(p)) != '_base_'
                   and not p.startswith(osp.join(CONFIGS, 'demo'))
                   and not p.startswith(osp.join(CONFIGS, 'deploy'))}
    assert sorted(index) == sorted(
        osp.relpath(osp.join(d, 'metafile.yml'), REPO) for d in family_dirs)
    names, collections = [], []
    for meta in index:
        data = load(osp.join(REPO, meta))
        collections += [c['Name'] for c in data['Collections']]
        assert osp.isfile(osp.join(REPO, data['Collections'][0]['README']))
        for m in data['Models']:
            names.append(m['Name'])
            assert osp.splitext(osp.basename(m['Config']))[0] == m['Name']
            assert osp.dirname(m['Config']) == osp.dirname(meta), m['Config']
            assert osp.isfile(osp.join(REPO, m['Config'])), m['Config']
            # results only where weights exist: the RMT authors', converted
            assert ('Results' in m) == ('Converted From' in m), m['Name']
            if 'Results' in m:
                assert '_rmt-' in m['Config'] or '/rmt/' in m['Config'], m['Name']
    assert len(names) == len(set(names)) and len(collections) == len(set(collections))
    shipped = sorted(osp.splitext(osp.basename(p))[0] for d in family_dirs
                     for p in glob.glob(osp.join(d, '*.py')))
    assert sorted(names) == shipped
    # the authors' numbers are the converter's (one source): RMT-T's top-1
    rmt_t = [m for m in load(osp.join(CONFIGS, 'cls', 'rmt', 'metafile.yml'))['Models']
             if m['Name'] == 'rmt-t_8xb128_in1k'][0]
    from mmevt.converters.rmt import README_TOP1
    assert rmt_t['Results'][0]['Metrics']['Top 1 Accuracy'] == README_TOP1['rmt-t']


def test_the_zoo_tool_refuses_a_family_it_does_not_know(tmp_path):
    tool = load_tool('tools/misc/make_metafile.py')
    (tmp_path / 'configs' / 'det' / 'new_family').mkdir(parents=True)
    (tmp_path / 'configs' / 'det' / 'new_family' / 'x_evt-t.py').write_text('')
    with pytest.raises(ValueError, match='configs/det/new_family has no entry in FAMILIES'):
        tool.family_configs(str(tmp_path))


def test_mmpretrain_get_model_and_list_models_take_evt_names(tmp_path):
    import mmevt
    from mmpretrain import get_model, list_models
    assert sorted(mmevt.MODEL_NAMES) == cls_config_names()
    evt = list_models('*evt*')
    assert {'evt-t_8xb128_in1k', 'evt-l_in1k-pre_8xb128_in1k-384px'} <= set(evt)
    assert all(n.startswith('rmt') for n in list_models('rmt-')) and list_models('rmt-t_')
    # mmpretrain registers its own index lazily, after ours: no clash, both present
    assert 'resnet50_8xb32_in1k' in list_models('resnet50_')
    model = get_model('evt-t_8xb128_in1k')
    assert type(model.backbone).__name__ == 'EVT' and model.backbone.embed_dims[0] == 64
    # weights from a local file (pretrained=PATH): a changed state comes back exactly
    state = {k: v + 0.01 if v.is_floating_point() else v
             for k, v in model.state_dict().items()}
    torch.save({'state_dict': state}, tmp_path / 'evt-t.pth')
    loaded = get_model('evt-t_8xb128_in1k', pretrained=str(tmp_path / 'evt-t.pth'))
    for k, v in loaded.state_dict().items():
        torch.testing.assert_close(v, state[k], rtol=0, atol=0, msg=k)
    with torch.no_grad():
        assert loaded(torch.randn(1, 3, 96, 96), mode='tensor').shape == (1, 1000)


def test_inferencer_classifies_a_photo_with_an_evt_name(tmp_path):
    import mmevt  # noqa: F401
    from mmpretrain import ImageClassificationInferencer, get_model

    from mmevt.utils.sample_images import sample_photo_path
    ckpt = tmp_path / 'rmt-t.pth'
    torch.save({'state_dict': get_model('rmt-t_8xb128_in1k').state_dict()}, ckpt)
    inferencer = ImageClassificationInferencer('rmt-t_8xb128_in1k', pretrained=str(ckpt))
    result = inferencer(sample_photo_path())[0]
    assert 0 <= result['pred_label'] < 1000 and len(result['pred_scores']) == 1000
    assert abs(sum(result['pred_scores']) - 1) < 1e-3


def test_model_name_registration_is_guarded(monkeypatch):
    from mmpretrain.apis import ModelHub

    from mmevt.hub import register_model_names
    names = register_model_names()  # a second registration: a no-op, not a clash error
    assert sorted(names) == cls_config_names()
    # a name taken by another package: a warning, mmevt still imports
    saved = dict(ModelHub._models_dict)
    try:
        for n in names:
            ModelHub._models_dict.pop(n)
        ModelHub._models_dict[names[0]] = saved['resnet50_8xb32_in1k'] \
            if 'resnet50_8xb32_in1k' in saved else saved[names[1]]
        with pytest.warns(UserWarning, match='model names not registered'):
            assert register_model_names() == []
    finally:
        ModelHub._models_dict.clear()
        ModelHub._models_dict.update(saved)
    # mmpretrain absent: nothing registered, no error
    monkeypatch.setitem(sys.modules, 'mmpretrain.apis', None)
    assert register_model_names() == []


def test_import_adds_the_config_prefix():
    import mmevt  # noqa: F401
    from mmengine.config.utils import MODULE2PACKAGE
    assert MODULE2PACKAGE['mmevt'] == 'mmevt'


def test_toolkit_config_index_is_read_once_with_mmengines_answers():
    import mmevt  # noqa: F401
    from mmengine.config import Config, utils
    from mmengine.utils import get_installed_path

    from mmevt.patches import config_resolution as resolution
    assert utils._get_cfg_metainfo is resolution._cached_cfg_metainfo
    original = resolution._cached_cfg_metainfo.__wrapped__
    mmdet = get_installed_path('mmdet')
    name = 'mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'  # a model of mmdet's index
    assert resolution._cached_cfg_metainfo(mmdet, name) == original(mmdet, name)
    # mmengine asks without '.py', and a base is in no metafile: both raise the ValueError
    # on which mmengine falls back to .mim/configs/<path>
    for lookup in (original, resolution._cached_cfg_metainfo):
        with pytest.raises(ValueError, match='but got _base_/models/mask-rcnn_r50_fpn$'):
            lookup(mmdet, '_base_/models/mask-rcnn_r50_fpn')
    # parsing a config with several mmdet:: bases uses the index, built once
    before = resolution._config_index.cache_info()
    cfg = Config.fromfile(osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_1x_coco.py'))
    after = resolution._config_index.cache_info()
    assert cfg.model.backbone.type == 'EVT'
    assert after.hits + after.misses - before.hits - before.misses >= 3
    assert after.misses - before.misses <= 1


# ------------------------------------------------------------------ the wheel (subprocess)
USER_SCRIPT = r'''
"""Run from an empty directory with only the installed wheel (first on PYTHONPATH)."""
import glob, json, os, os.path as osp, sys
import torch
if sys.argv[1] == 'no-flex':  # a torch without FlexAttention (< 2.5): the import fails
    sys.modules['torch.nn.attention.flex_attention'] = None
import mmevt
from mmengine.config import Config
from mmengine.hub import get_config
from mmengine.registry import MODELS, init_default_scope
from mmevt.ops.attention import flex_available

report = dict(mmevt_file=mmevt.__file__, flex=flex_available(), forwards={})
mim = osp.join(osp.dirname(mmevt.__file__), '.mim')


def forward_once(cfg):
    """Build as a Runner does (root registry + default scope), then one test step."""
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model).eval()
    h, w = 128, 160
    img = torch.randint(0, 256, (3, h, w), dtype=torch.uint8)
    meta = dict(img_shape=(h, w), ori_shape=(h, w), scale_factor=(1., 1.), pad_shape=(h, w))
    if cfg.default_scope == 'mmpretrain':
        samples = None
    elif cfg.default_scope == 'mmdet':
        from mmdet.structures import DetDataSample
        samples = [DetDataSample(metainfo=meta)]
    else:
        from mmseg.structures import SegDataSample
        samples = [SegDataSample(metainfo=meta)]
    with torch.no_grad():
        out = model.test_step(dict(inputs=[img], data_samples=samples))
    return type(model).__name__, type(model.backbone).__name__, sorted(out[0].keys())


for path in sorted(glob.glob('user_*.py')):
    report['forwards'][path] = forward_once(Config.fromfile(path))

if sys.argv[1] == 'all':
    report['get_config'] = get_config('mmevt::cls/evt/evt-t_8xb128_in1k.py').model.backbone.arch
    # every shipped config through mmevt::: no typed dict may end up in scope 'mmevt'.
    # mmengine re-reads all of a toolkit's metafiles for each `mmdet::` base (~0.3 s); the
    # answer for a path does not change, so it is remembered (errors too) for this loop.
    import mmengine.config.config as mmcfg
    seen, lookup = {}, mmcfg._get_external_cfg_path

    def remembered(package_path, cfg_file):
        key = (package_path, cfg_file)
        if key not in seen:
            try:
                seen[key] = (True, lookup(package_path, cfg_file))
            except Exception as err:  # noqa: BLE001 - replayed below as raised
                seen[key] = (False, err)
        ok, value = seen[key]
        if ok:
            return value
        raise value

    mmcfg._get_external_cfg_path = remembered
    bad, n, missing = [], 0, {}

    def walk(node, where):
        if isinstance(node, dict):
            if node.get('_scope_') == 'mmevt':
                bad.append(where)
            for k, v in node.items():
                walk(v, f'{where}.{k}')
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                walk(v, f'{where}[{i}]')

    for path in sorted(glob.glob(osp.join(mim, 'configs', '**', '*.py'), recursive=True)):
        rel = osp.relpath(path, osp.join(mim, 'configs'))
        with open('inherit.py', 'w') as f:
            f.write(f'_base_ = {"mmevt::" + rel!r}\n')
        try:
            walk(Config.fromfile('inherit.py').to_dict(), rel)
        except ModuleNotFoundError as e:  # a toolkit this stack lacks (the fork: mmpose)
            missing.setdefault(str(e).split()[0], []).append(rel)
        n += 1
    report['scope_checked'], report['scope_mmevt'], report['missing'] = n, bad, missing
    from mmpretrain import get_model, list_models
    report['list_models'] = list_models('*evt*')
    report['get_model'] = type(get_model('evt-t_8xb128_in1k').backbone).__name__
print('REPORT ' + json.dumps(report))
'''



def _run(cmd, cwd, env, timeout=HANG_TIMEOUT):
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    assert proc.returncode == 0, f'{cmd} exited {proc.returncode}:\n{proc.stdout[-6000:]}'
    return proc.stdout


def _pip_command(line: str, site: str):
    """A ``pip`` line of docs/own_environment.md as run here: this interpreter's pip, the install into ``site``
    (``--target``, no deps) so the test leaves the project's environment untouched."""
    args = line.split()
    assert args[0] == 'pip', line
    cmd = [sys.executable, '-m', 'pip', *args[1:]]
    if args[1] == 'install':
        cmd += ['--no-deps', '--no-index', '--target', site]
    return cmd


@pytest.mark.e2e
def test_wheel_installed_in_a_user_environment(tmp_path, shapes_root):
    # the page's commands, from a copy of the sources (the build leaves build/ behind)
    src, user, site = tmp_path / 'mmevt-src', tmp_path / 'user', tmp_path / 'site'
    shutil.copytree(REPO, src, ignore=COPY_SKIP)
    user.mkdir()
    bash = [ln.split('#')[0].strip() for b in doc_blocks('bash') for ln in b.splitlines()]
    pip_lines = [ln.replace('/path/to/mmevt', str(src)) for ln in bash if ln.startswith('pip')]
    assert [ln.split()[:2] for ln in pip_lines] == [['pip', 'wheel'], ['pip', 'install']]
    assert '--no-build-isolation' in pip_lines[0] and '--no-deps' in pip_lines[0]
    env = tool_env(PIP_DISABLE_PIP_VERSION_CHECK='1')
    env.pop('PYTHONPATH', None)
    _run(_pip_command(pip_lines[0], str(site)), cwd=user, env=env)
    wheels = glob.glob(str(user / 'dist' / 'mmevt-*.whl'))
    assert len(wheels) == 1, wheels
    names = zipfile.ZipFile(wheels[0]).namelist()
    # the package is the source's modules, no more (the docs' tables and the GPU report are
    # tools/, which only .mim carries: tests/test_layers.py checks the sources hold none)
    sources = {osp.relpath(p, REPO) for p in glob.glob(osp.join(REPO, 'mmevt', '**', '*.py'),
                                                       recursive=True)}
    assert {n for n in names if n.endswith('.py') and not n.startswith('mmevt/.mim/')} == sources
    for must in ('mmevt/.mim/model-index.yml', 'mmevt/.mim/configs/cls/evt/metafile.yml',
                 'mmevt/.mim/configs/det/mask_rcnn/mask-rcnn_evt-s_fpn_1x_coco.py',
                 'mmevt/.mim/tools/train.py', 'mmevt/.mim/tools/test.py',
                 'mmevt/.mim/tools/deployment/pytorch2onnx.py'):
        assert must in names, must
    n_cfg = len(glob.glob(osp.join(CONFIGS, '**', '*.py'), recursive=True))
    assert sum(n.startswith('mmevt/.mim/configs/') and n.endswith('.py') for n in names) == n_cfg
    entry = zipfile.ZipFile(wheels[0]).read(
        next(n for n in names if n.endswith('entry_points.txt'))).decode()
    assert 'mmevt-train = mmevt.cli:train' in entry and 'mmevt-test = mmevt.cli:test' in entry
    # the dependencies are ranges that the installed stack satisfies, so pip keeps torch;
    # mmengine, mmcv and the toolkits are not dependencies (either stack provides them)
    meta = zipfile.ZipFile(wheels[0]).read(
        next(n for n in names if n.endswith('.dist-info/METADATA'))).decode()
    requires = [Requirement(line.split(':', 1)[1].strip()) for line in meta.splitlines()
                if line.startswith('Requires-Dist:')]
    core = {r.name: r for r in requires if r.marker is None}
    assert sorted(core) == ['einops', 'numpy', 'torch'], sorted(core)
    for name, req in core.items():
        assert not any(spec.operator in ('==', '===') for spec in req.specifier), req
        assert req.specifier.contains(version(name), prereleases=True), (req, version(name))
    assert not any(r.name.replace('onedl-', '') in ('mmengine', 'mmcv', 'mmdet',
                   'mmsegmentation', 'mmdetection', 'mmpretrain') and r.marker is None
                   for r in requires)
    _run(_pip_command(pip_lines[1], str(site)), cwd=user, env=env)
    assert not osp.exists(site / 'torch')  # --no-deps: nothing but mmevt

    # the page's user configs, from a directory without the sources
    env['PYTHONPATH'] = str(site)
    blocks = doc_blocks('python')
    configs = [b for b in blocks if '_base_' in b]
    assert any("'mmevt::" in b for b in configs) and any('custom_imports' in b for b in configs)
    for i, text in enumerate(configs):
        (user / f'user_{i}.py').write_text(text)
    (user / 'run.py').write_text(USER_SCRIPT)
    out = _run([sys.executable, 'run.py', 'all'], cwd=user, env=env)
    got = json.loads(out.split('REPORT ', 1)[1].splitlines()[0])
    assert got['mmevt_file'].startswith(str(site)), got['mmevt_file']
    assert got['flex'] is True
    assert len(got['forwards']) == len(configs)
    for name, (model, backbone, _) in got['forwards'].items():
        assert backbone == 'EVT', (name, model)
    assert got['scope_checked'] == n_cfg and got['scope_mmevt'] == [], got['scope_mmevt']
    # refused only for want of mmpose (the fork has none), naming it: the pose configs
    pose = sorted(osp.relpath(p, CONFIGS) for p in glob.glob(osp.join(CONFIGS, '**', '*.py'),
                                                               recursive=True)
                  if 'td-hm_' in osp.basename(p))
    assert len(pose) >= 3
    assert got['missing'] == ({} if importlib.util.find_spec('mmpose') else {'mmpose': pose})
    assert got['get_config'] == 'evt-t'
    assert 'evt-t_8xb128_in1k' in got['list_models'] and got['get_model'] == 'EVT'
    # the same configs where torch has no FlexAttention
    out = _run([sys.executable, 'run.py', 'no-flex'], cwd=user, env=env)
    got = json.loads(out.split('REPORT ', 1)[1].splitlines()[0])
    assert got['flex'] is False and len(got['forwards']) == len(configs)

    # the console command: 2 training iterations of a user config inheriting mmevt::
    (user / 'seg.py').write_text(SEG_USER_CONFIG.format(root=shapes_root + '/'))
    log = _run([str(site / 'bin' / 'mmevt-train'), 'seg.py', '--work-dir', 'work'],
               cwd=user, env=env)
    assert 'Iter(train) [2/2]' in log, log[-3000:]
    assert osp.isfile(user / 'work' / 'iter_2.pth')


# ------------------------------------------------------------------ one way per name
def _reexport_only(path: str) -> bool:
    """A module whose body is only imports (and ``__all__``, a docstring, a ``__main__``
    guard): an alias of names that live elsewhere."""
    import ast
    body = ast.parse(open(path).read()).body
    own = [n for n in body
           if not isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr, ast.If))
           and not (isinstance(n, ast.Assign) and [getattr(t, 'id', None) for t in n.targets]
                    == ['__all__'])]
    return not own and any(isinstance(n, ast.ImportFrom) for n in body)


def test_no_module_merely_re_exports_another(tmp_path):
    # 0.2.0 removed the aliases of moved modules (mmevt.deployment, mmevt.deploy_mmdeploy,
    # mmevt.mmdeploy_compat, mmevt.utils.atomic_io / dist / rmt_convert): each name is
    # imported from one place. A package's __init__ gathers its own modules' names.
    aliases = [osp.relpath(p, REPO) for p in glob.glob(osp.join(REPO, 'mmevt', '**', '*.py'),
                                                      recursive=True)
               if osp.basename(p) != '__init__.py' and _reexport_only(p)]
    assert aliases == [], f'modules that only re-export names of others: {aliases}'
    for gone in ('mmevt.deployment', 'mmevt.deploy_mmdeploy', 'mmevt.mmdeploy_compat',
                 'mmevt.utils.atomic_io', 'mmevt.utils.dist', 'mmevt.utils.rmt_convert'):
        path = osp.join(REPO, *gone.split('.'))
        assert not osp.exists(path + '.py') and not osp.isdir(path), gone
    # the check finds an alias module, and passes one with code of its own
    (tmp_path / 'alias.py').write_text('"""Moved."""\nfrom .x import y\n__all__ = [\'y\']\n')
    (tmp_path / 'own.py').write_text('from .x import y\n\n\ndef z():\n    return y\n')
    assert _reexport_only(str(tmp_path / 'alias.py'))
    assert not _reexport_only(str(tmp_path / 'own.py'))
