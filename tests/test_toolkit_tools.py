"""The toolkits' own tools/train.py and tools/test.py on our configs, without `pkg_resources`.

A toolkit's own tool reads the config before its ``custom_imports`` import mmevt, and
mmengine resolves each ``pkg::`` base (``mmdet::`` ...) through its own package look-up:
upstream mmengine 0.10.7's imports ``pkg_resources`` (gone since setuptools 82), the
fork's looks for the distribution ``mmsegmentation`` (its is ``onedl-mmsegmentation``).
Every config of ours therefore inherits ``configs/_base_/import_mmevt.py`` before its first
``pkg::`` base: mmengine runs each base file before it resolves the next, and that file's
``__import__('mmevt')`` replaces the look-up (``mmevt/patches/config_resolution.py``).
"""
import ast
import functools
import glob
import importlib.util
import json
import os.path as osp

import pytest
import torch

from helpers import (BLOCK_PKG_RESOURCES, CONFIGS, UPSTREAM_ONLY_TOOLKITS, current_stack,
                     load_config, refused_where_missing, run_tool, upstream_only_toolkit,
                     write_config)

IMPORT_BASE = osp.join(CONFIGS, '_base_', 'import_mmevt.py')
MASK_RCNN = osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_1x_coco.py')
SEM_FPN = osp.join(CONFIGS, 'seg', 'sem_fpn', 'fpn_evt-t_8xb2-80k_ade20k-512x512.py')
UPERNET = osp.join(CONFIGS, 'seg', 'upernet', 'upernet_evt-t_8xb2-160k_ade20k-512x512.py')
RETINANET = osp.join(CONFIGS, 'det', 'retinanet', 'retinanet_evt-t_fpn_1x_coco.py')
POSE_DEMO = osp.join(CONFIGS, 'demo', 'td-hm_evt-test_figures-128x96.py')
ALL_CONFIGS = sorted(glob.glob(osp.join(CONFIGS, '**', '*.py'), recursive=True))
# the configs that name a `pkg::` base themselves (every other config inherits one of them)
PKG_ROOTS = ['action/tsn/tsn_evt-t_8xb32-1x1x3-100e_kinetics400-rgb.py',
             'cls/evt-swin/evt-swin-t_16xb64_in1k.py', 'cls/evt/evt-t_8xb128_in1k.py',
             'det/cascade_rcnn/cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py',
             'det/mask_rcnn/mask-rcnn_evt-t_fpn_1x_coco.py',
             'det/retinanet/retinanet_evt-t_fpn_1x_coco.py',
             'pose/topdown_heatmap/td-hm_evt-t_8xb32-210e_coco-256x192.py',
             'rotated/oriented_rcnn/oriented-rcnn-le90_evt-t_fpn_1x_dota.py',
             'rotated/roi_trans/roi-trans-le90_evt-t_fpn_1x_dota.py',
             'rotated/rotated_retinanet/rotated-retinanet-rbox-le90_evt-t_fpn_1x_dota.py',
             'seg/sem_fpn/fpn_evt-t_8xb2-80k_ade20k-512x512.py',
             'seg/upernet/upernet_evt-t_8xb2-160k_ade20k-512x512.py']

# `python TOOL ARGS...` with `import pkg_resources` failing (as with setuptools >= 82) and
# nothing imported beforehand: sys.path[0] is the tool's folder, as when Python runs a file
RUN_TOOL = BLOCK_PKG_RESOURCES + '''
import os, runpy
tool = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(tool)
assert 'mmevt' not in sys.modules
runpy.run_path(tool, run_name='__main__')
'''


# ------------------------------------------------------------------ the configs (static)
def _bases(path: str) -> list:
    """The ``_base_`` list of a config file, as mmengine's ``Config._get_base_files``."""
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == '_base_'):
            bases = ast.literal_eval(node.value)
            return [bases] if isinstance(bases, str) else list(bases)
    return []


def _pkg_base_before_import(path: str, state: dict):
    """``(file, base)``: the first ``pkg::`` base mmengine resolves before a base has imported
    mmevt and the file naming it, reading ``path`` as ``Config._file2dict`` does (bases in
    order, each base file run before the next is resolved); None when there is none.
    ``state['imported']``: mmevt imported."""
    for base in _bases(path):
        if '::' in base:
            state['pkg'] = True
            if not state['imported']:
                return osp.relpath(path, CONFIGS), base
            continue  # the toolkit's own file: its bases are the toolkit's
        local = osp.normpath(osp.join(osp.dirname(path), base))
        found = _pkg_base_before_import(local, state)
        if found:
            return found
    if osp.normpath(path) == IMPORT_BASE:
        state['imported'] = True  # its body runs once its (no) bases are read
    return None


def test_every_config_imports_mmevt_before_its_first_pkg_base():
    with_pkg = []
    for path in ALL_CONFIGS:
        state = dict(imported=False, pkg=False)
        found = _pkg_base_before_import(path, state)
        assert found is None, (
            f'{osp.relpath(path, CONFIGS)}: {found[0]} resolves {found[1]!r} before mmevt is '
            f'imported: make configs/_base_/import_mmevt.py the first base of {found[0]}')
        with_pkg += [osp.relpath(path, CONFIGS)] if state['pkg'] else []
    # every model config has a `pkg::` base in its chain (deploy configs and bases have none)
    models = [osp.relpath(p, CONFIGS) for p in ALL_CONFIGS
              if '_base_' not in p and not p.startswith(osp.join(CONFIGS, 'deploy'))]
    assert sorted(with_pkg) == sorted(models)
    roots = sorted(p for p in with_pkg if any('::' in b for b in _bases(osp.join(CONFIGS, p))))
    assert roots == sorted(PKG_ROOTS)
    for root in roots:  # first base itself, not only before the first pkg:: base
        assert _bases(osp.join(CONFIGS, root))[0] == '../../_base_/import_mmevt.py', root


def test_import_base_is_one_call_that_adds_nothing_to_a_config():
    from mmengine.config import Config
    with open(IMPORT_BASE) as f:
        body = ast.parse(f.read()).body
    assert [ast.unparse(node) for node in body] == ["__import__('mmevt')"]
    # a call, not an `import` statement: not taken for a lazy-import (pure-Python) config
    assert not Config._is_lazy_import(IMPORT_BASE)
    assert Config.fromfile(IMPORT_BASE).to_dict() == {}


@pytest.mark.parametrize('rel', PKG_ROOTS)
def test_configs_dump_and_reload(rel, tmp_path):
    # runners dump the parsed config to work_dir; the import base leaves no trace in it
    from mmengine.config import Config
    path = osp.join(CONFIGS, rel)
    toolkit = upstream_only_toolkit(path)
    if toolkit and refused_where_missing(toolkit, path):  # mmpose, mmaction2 on the fork
        return
    cfg = load_config(path)
    text = cfg.pretty_text
    assert 'import_mmevt' not in text and '__import__' not in text
    dumped = str(tmp_path / osp.basename(path))
    cfg.dump(dumped)
    assert Config.fromfile(dumped).to_dict() == cfg.to_dict()


# ------------------------------------------------- mmengine alone, in a fresh process
RESOLVE = BLOCK_PKG_RESOURCES + '''
import json
from mmengine.config import Config
out = {}
for name, path in json.loads(sys.argv[1]):  # without the import base: mmengine's look-up
    try:
        Config.fromfile(path, import_custom_modules=False)
        out[name] = 'parsed'
    except Exception as e:
        out[name] = f'{type(e).__name__}: {e}'
assert 'mmevt' not in sys.modules
cfg = Config.fromfile(sys.argv[2], import_custom_modules=False)  # with it first
out['imported'] = 'mmevt' in sys.modules
out['keys'] = sorted(cfg.keys())
print('REPORT ' + json.dumps(out))
'''


@pytest.mark.e2e
def test_pkg_bases_resolve_without_pkg_resources_only_after_the_import_base(tmp_path):
    toolkits = ['mmdet', 'mmseg', 'mmpretrain'] + [
        t for t in UPSTREAM_ONLY_TOOLKITS if importlib.util.find_spec(t) is not None]
    plain = []
    for toolkit in toolkits:
        plain.append((toolkit, write_config(
            tmp_path / f'{toolkit}.py', f"_base_ = '{toolkit}::_base_/default_runtime.py'\n")))
    ours = write_config(tmp_path / 'ours.py', f"_base_ = [{IMPORT_BASE!r}, "
                        "'mmseg::_base_/default_runtime.py']\n")
    out = run_tool('-c', RESOLVE, json.dumps(plain), ours)
    got = json.loads(out.split('REPORT ', 1)[1].splitlines()[0])
    if current_stack() == 'upstream':
        # mmengine 0.10.7's is_installed imports pkg_resources, for every toolkit
        for toolkit in toolkits:
            assert got[toolkit] == "ModuleNotFoundError: No module named 'pkg_resources'", got
    else:
        # the fork's looks up distributions by MODULE2PACKAGE's names: `mmsegmentation`
        assert got['mmseg'].startswith('ModuleNotFoundError: mmsegmentation is not installed')
        assert got['mmdet'] == got['mmpretrain'] == 'parsed', got
    assert got['imported'] is True  # by the first base, not custom_imports (not run here)
    assert 'default_scope' in got['keys'] and not any('mmevt' in k for k in got['keys'])


# ------------------------------------------ the toolkits' own tools, end to end (subprocess)
def _tool_path(toolkit: str, tool: str) -> str:
    from mmevt.apis import toolkit_tool_path
    return toolkit_tool_path(toolkit, tool)


def _own_tool(toolkit: str, tool: str, *args: str) -> str:
    return run_tool('-c', RUN_TOOL, _tool_path(toolkit, tool), *args)


def _last_checkpoint(work: str) -> str:
    with open(osp.join(work, 'last_checkpoint')) as f:
        ckpt = f.read().strip()
    assert osp.isfile(ckpt), ckpt
    return ckpt


def _det(tmp_path, shapes_root, base=MASK_RCNN, family='mask_rcnn'):
    from det_tiny import tiny_det_config
    work = str(tmp_path / 'work')
    cfg = write_config(tmp_path / f'{family}.py',
                       tiny_det_config(base, shapes_root, work, family=family))
    metrics = ['coco/bbox_mAP:'] + ['coco/segm_mAP:'] * (family != 'retinanet')
    # 8 images, batch 4: 2 iterations; no validation in training (tools/test.py evaluates)
    return cfg, work, ['train_cfg.val_interval=2'], 'Epoch(train) [1][2/2]', metrics


def _seg(tmp_path, shapes_root, base=SEM_FPN, family='sem_fpn'):
    from seg_tiny import tiny_seg_config
    work = str(tmp_path / 'work')
    cfg = write_config(tmp_path / f'{family}.py',
                       tiny_seg_config(base, shapes_root, work, family))
    return cfg, work, ['train_cfg.val_interval=3'], 'Iter(train) [2/2]', ['mIoU:', 'aAcc:']


def _cls(tmp_path, shapes_root):
    from cls_tiny import tiny_cls_config

    from mmevt.datasets import generate_shape_classes
    root = str(tmp_path / 'data')
    generate_shape_classes(root, num_train=4, num_val=1, img_size=(64, 64))  # 24 + 6 images
    work = str(tmp_path / 'work')
    cfg = write_config(tmp_path / 'cls.py', tiny_cls_config(root, work))
    return cfg, work, ['train_cfg.val_interval=2'], 'Epoch(train) [1][1/1]', \
        ['accuracy/top1:']


def _pose(tmp_path, shapes_root):
    from mmevt.datasets import generate_keypoints
    root = str(tmp_path / 'data')
    generate_keypoints(root, 4, 2, (128, 128), seed=0)
    work = str(tmp_path / 'work')
    loader = ('batch_size=2, num_workers=0, persistent_workers=False, '
              'dataset=dict(data_root=data_root)')
    cfg = write_config(tmp_path / 'pose.py', f'''_base_ = {POSE_DEMO!r}
data_root = {root + '/'!r}
work_dir = {work!r}
train_dataloader = dict({loader})
val_dataloader = dict({loader})
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/person_keypoints_validation.json')
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=1, val_interval=2)
param_scheduler = []
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1, save_best=None))
''')
    return cfg, work, [], 'Epoch(train) [1][2/2]', ['coco/AP:']


FAMILIES = dict(mmdet=_det, mmseg=_seg, mmpretrain=_cls, mmpose=_pose)


@pytest.mark.e2e
@pytest.mark.parametrize('toolkit', list(FAMILIES))
def test_toolkit_own_train_and_test_without_pkg_resources(toolkit, shapes_root, tmp_path):
    if toolkit == 'mmpose' and refused_where_missing('mmpose', POSE_DEMO):
        return  # no fork of mmpose exists (docs/pose.md): the config says what it needs
    cfg, work, options, trained, metrics = FAMILIES[toolkit](tmp_path, shapes_root)
    log = _own_tool(toolkit, 'train', cfg, '--work-dir', work,
                    *(['--cfg-options', *options] if options else []))
    assert trained in log, log[-3000:]
    # the config the runner dumped to work_dir parses again, without the import base
    from mmengine.config import Config
    dumped = Config.fromfile(osp.join(work, osp.basename(cfg)))
    assert dumped.default_scope == toolkit and dumped.model.backbone.type == 'EVT'
    out = _own_tool(toolkit, 'test', cfg, _last_checkpoint(work), '--work-dir',
                    str(tmp_path / 'test'))
    for metric in metrics:
        assert metric in out, out[-3000:]


# ------------------------------- compile=True through the toolkits' own tools (subprocess)
def _losses(log: str) -> list:
    """The loss terms of each logged training iteration, as mmengine prints them."""
    import re
    return [{k: float(v) for k, v in re.findall(r'\s(loss[\w/]*): (-?[\d.]+(?:e-?\d+)?)', ln)}
            for ln in log.splitlines() if '(train)' in ln and ' loss: ' in ln]


def _metrics(log: str, names) -> dict:
    import re
    return {n: re.findall(re.escape(n) + r'\s*([\d.]+)', log)[-1] for n in names}


def _breaks(log: str) -> list:
    """``file:line`` of each graph break Dynamo logged (``TORCH_LOGS=graph_breaks``)."""
    import re
    return sorted(set(re.findall(r'Graph break in user code at (\S+:\d+)', log)))


def _train_eager_and_compiled(toolkit, cfg, options, trained, tmp_path,
                              backend: str = 'aot_eager') -> dict:
    """Train ``cfg`` with the toolkit's own ``tools/train.py`` compiled (mmengine's
    ``compile`` switch, dict form, on Dynamo's ``backend``: aot_eager traces the graphs
    and their backward without inductor's code generation, eager the graphs only) and
    eagerly; check what both must share.

    Returns:
        dict: mode -> (its log, its work dir).
    """
    runs = {}
    for mode in ('compiled', 'eager'):
        work = str(tmp_path / mode)
        extra = [f'compile.backend={backend}'] if mode == 'compiled' else []
        proc = run_tool('-c', RUN_TOOL, _tool_path(toolkit, 'train'), cfg, '--work-dir', work,
                        '--cfg-options', 'randomness.seed=0', *options, *extra,
                        env=dict(TORCH_LOGS='graph_breaks'), check=False)
        assert proc.returncode == 0 and trained in proc.stdout, proc.stdout[-3000:]
        runs[mode] = (proc.stdout, work)
    log, eager_log = runs['compiled'][0], runs['eager'][0]
    assert 'Model has been "compiled"' in log and 'Model has been' not in eager_log
    # every logged iteration's losses: after the first, they show the optimizer steps
    # agree (where weights are compared directly, a weight whose gradient is rounding
    # noise, like a conv bias before a norm, moves by about lr in either run: Adam's
    # normalised step; it changes no loss)
    wants, gots = _losses(eager_log), _losses(log)
    assert len(gots) == len(wants) >= 1 and 'loss' in wants[0]
    for want, got in zip(wants, gots):
        assert set(got) == set(want)
        for name, value in want.items():  # printed to 4 decimals; relative to its scale
            assert abs(got[name] - value) <= 1e-3 * abs(value) + 2e-4, (name, got, want)
    # the heads may break the graph (docs/benchmark.md lists where); the backbone never
    breaks = _breaks(log)
    assert not [b for b in breaks if '/mmevt/' in b], breaks
    print(f'{toolkit} graph breaks: {breaks}')
    return runs


@pytest.mark.e2e
@pytest.mark.parametrize('toolkit', ['mmdet', 'mmseg', 'mmpretrain'])
def test_compile_switch_through_the_toolkits_own_tools(
        toolkit, shapes_root, tmp_path):
    # mmengine's `compile` compiles the model's train_step, optimizer step included
    # (mmdet's and mmpretrain's configs' paramwise_cfg groups need mmevt's
    # plain-param-groups patch): first losses as eager's, the trained models' test metrics
    # equal. tools/test.py runs eager (mmengine compiles nothing for test / val).
    # CI cost (2 cores, measured with another test run beside it): mmdet 306 s, mmseg and
    # mmpretrain less; each trains twice and tests twice.
    cfg, _, options, trained, metrics = FAMILIES[toolkit](tmp_path, shapes_root)
    runs = _train_eager_and_compiled(toolkit, cfg, options, trained, tmp_path)
    metrics_of = {}
    for mode, (_, work) in runs.items():
        test = _own_tool(toolkit, 'test', cfg, _last_checkpoint(work), '--work-dir',
                         str(tmp_path / f't_{mode}'))
        metrics_of[mode] = _metrics(test, metrics)
    assert metrics_of['compiled'] == metrics_of['eager']


@pytest.mark.e2e
@pytest.mark.parametrize('family, toolkit', [('retinanet', 'mmdet'), ('upernet', 'mmseg'),
                                             ('mmpose', 'mmpose')])
def test_compile_switch_trains_the_other_families(family, toolkit, shapes_root, tmp_path):
    # the families the test above leaves out, each trained compiled and eager (losses
    # equal, no graph break in mmevt), on Dynamo's eager backend (the graphs, not AOT's
    # backward: the test above traces that) and without tools/test.py: what compile
    # changes is the training step, and the test above shows the metrics follow. Cascade
    # is left out for its CI cost (350 s; its RoI heads are Mask R-CNN's kind, traced
    # above; tested by hand: it passes).
    # CI cost (2 cores, measured with another test run beside it): retinanet 123 s,
    # upernet 96 s; mmpose (its demo config, upstream only) 62 s alone.
    if toolkit == 'mmpose' and refused_where_missing('mmpose', POSE_DEMO):
        return  # no fork of mmpose exists (docs/pose.md): the config says what it needs
    make = dict(retinanet=functools.partial(_det, base=RETINANET, family='retinanet'),
                upernet=functools.partial(_seg, base=UPERNET, family='upernet'),
                mmpose=_pose)[family]
    cfg, _, options, trained, _ = make(tmp_path, shapes_root)
    _train_eager_and_compiled(toolkit, cfg, options, trained, tmp_path, backend='eager')
