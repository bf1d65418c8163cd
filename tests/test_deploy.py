"""mmdeploy + ONNX Runtime deployment (tools/deployment/deploy.py, mmevt.deploy): the
rewriters, the deploy configs, and every family exported and compared with PyTorch in
onnxruntime on a real photograph."""
import glob
import os.path as osp
import re
import sys

import pytest
import torch
import torch.nn.functional as F

from helpers import CONFIGS, REPO, load_tool, run_tool, write_config
from mmevt.deploy.mmdeploy_export import default_image, export_mmdeploy, load_configs
from mmevt.deploy.parity import TOLERANCES, verify_mmdeploy
from mmevt.deploy.rewriters import mmdeploy_compat
from mmevt.deploy.rewriters.adaptive_pool import adaptive_avg_pool2d__onnxruntime
from mmevt.deploy.rewriters.scaled_dot_product_attention import \
    scaled_dot_product_attention__onnxruntime
from mmevt.deploy.shapes import MMDEPLOY_DYNAMIC_HW_ERROR

DEPLOY = osp.join(CONFIGS, 'deploy')
DEPLOY_CONFIGS = sorted(p for p in glob.glob(osp.join(DEPLOY, '**', '*.py'), recursive=True)
                        if '_base_' not in p)
DET_CFG = osp.join(DEPLOY, 'mmdet', 'detection_onnxruntime_static-800x1344.py')
INS_CFG = osp.join(DEPLOY, 'mmdet', 'instance-seg_onnxruntime_static-800x1344.py')
SEG_CFG = osp.join(DEPLOY, 'mmseg', 'segmentation_onnxruntime_static-512x512.py')
CLS_CFG = osp.join(DEPLOY, 'mmpretrain', 'classification_onnxruntime_static-224x224.py')
CLS_BATCH_CFG = osp.join(DEPLOY, 'mmpretrain',
                         'classification_onnxruntime_dynamic-batch-224x224.py')

RETINANET = osp.join(CONFIGS, 'det', 'retinanet', 'retinanet_evt-t_fpn_1x_coco.py')
MASK_RCNN = osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_1x_coco.py')
CASCADE = osp.join(CONFIGS, 'det', 'cascade_rcnn', 'cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py')
SEM_FPN = osp.join(CONFIGS, 'seg', 'sem_fpn', 'fpn_evt-t_8xb2-80k_ade20k-512x512.py')
UPERNET = osp.join(CONFIGS, 'seg', 'upernet', 'upernet_evt-t_8xb2-160k_ade20k-512x512.py')
CLASSIFIER = osp.join(CONFIGS, 'cls', 'evt', 'evt-t_8xb128_in1k.py')
# which deploy config each model config family uses
PAIRS = {RETINANET: DET_CFG, MASK_RCNN: INS_CFG, CASCADE: INS_CFG, SEM_FPN: SEG_CFG,
         UPERNET: SEG_CFG, CLASSIFIER: CLS_CFG}

# The tiny arch keeps each export to seconds; its stages are EVT-T's kinds of layers.
# At 96 x 128 the stage grids (24 x 32 ... 3 x 4) leave the last 1D group partial, so the
# padding branch is in every graph.
# Three classes: with random weights an 81-way softmax stays below the 0.05 score threshold
# (no detections to compare), a 4-way one does not. Narrow heads (32 channels) and 100
# proposals instead of 1000 keep the RoI heads cheap; the graph has every kind of layer.
NARROW = {'model.neck.out_channels': 32, 'model.rpn_head.in_channels': 32,
          'model.rpn_head.feat_channels': 32,
          'model.roi_head.bbox_roi_extractor.out_channels': 32,
          'model.roi_head.mask_roi_extractor.out_channels': 32,
          'model.roi_head.mask_head.in_channels': 32,
          'model.roi_head.mask_head.conv_out_channels': 32}
TWO_STAGE = dict(NARROW, **{
    'model.backbone.arch': 'evt-test', 'model.neck.in_channels': [16, 32, 64, 128],
    'model.roi_head.mask_head.num_classes': 3, 'model.test_cfg.rpn.max_per_img': 100})
HEAD = dict(num_classes=3, in_channels=32, fc_out_channels=64)
TINY = {
    RETINANET: {'model.backbone.arch': 'evt-test', 'model.neck.in_channels': [32, 64, 128],
                'model.neck.out_channels': 32, 'model.bbox_head.in_channels': 32,
                'model.bbox_head.feat_channels': 32},
    MASK_RCNN: dict(TWO_STAGE, **{f'model.roi_head.bbox_head.{k}': v
                                  for k, v in HEAD.items()}),
    CASCADE: dict(TWO_STAGE, **{f'model.roi_head.bbox_head.{i}.{k}': v for i in range(3)
                                for k, v in dict(HEAD, conv_out_channels=32).items()}),
    SEM_FPN: {'model.backbone.arch': 'evt-test', 'model.neck.in_channels': [16, 32, 64, 128]},
    UPERNET: {'model.backbone.arch': 'evt-test',
              'model.decode_head.in_channels': [16, 32, 64, 128],
              'model.decode_head.channels': 32, 'model.auxiliary_head.in_channels': 64,
              'model.auxiliary_head.channels': 32},
    CLASSIFIER: {'model.backbone.arch': 'evt-test', 'model.neck.in_channels': 128},
}
SMALL = [128, 96]  # onnx_config.input_shape, [W, H]


def test_rewriters_match_torch():
    """Our attention and adaptive pooling equal torch's (scale, float and bool masks, causal,
    grouped heads; windows that overlap or repeat); mmdeploy's own attention rewriter, which
    our compat module overrides, does not when a scale is passed (it divides by it)."""
    from mmdeploy.pytorch.functions.multi_head_attention_forward import \
        scaled_dot_product_attention__default as mmdeploy_sdpa
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 10, 16, generator=gen) for _ in range(3))
    bias = torch.randn(4, 10, 10, generator=gen)
    keep = torch.rand(10, 10, generator=gen) > 0.3
    keep[:, 0] = True  # no fully masked row (NaN in both)
    cases = [dict(scale=0.3), dict(attn_mask=bias, scale=16 ** -0.5), dict(attn_mask=keep),
             dict(is_causal=True)]
    for kw in cases:
        torch.testing.assert_close(scaled_dot_product_attention__onnxruntime(q, k, v, **kw),
                                   F.scaled_dot_product_attention(q, k, v, **kw), msg=str(kw))
    kv = k[:, :2], v[:, :2]
    torch.testing.assert_close(
        scaled_dot_product_attention__onnxruntime(q, *kv, enable_gqa=True),
        F.scaled_dot_product_attention(q, *kv, enable_gqa=True))
    ref = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    assert (mmdeploy_sdpa(q, k, v, scale=0.3) - ref).abs().max() > 0.1
    x = torch.randn(2, 8, 16, 13, generator=gen)  # UperNet's pooling on a 16 x 16 map: 3, 6
    for size in [6, 3, (1, 2), (None, 5), (32, 4), (16, 13)]:
        torch.testing.assert_close(adaptive_avg_pool2d__onnxruntime(x, size),
                                   F.adaptive_avg_pool2d(x, size), msg=str(size))


def test_compat_applies_inside_and_is_undone_after():
    import torch.onnx.symbolic_opset9 as opset9
    from mmdeploy.core import FUNCTION_REWRITER
    from mmdeploy.utils import IR, Backend
    from mmdeploy.core.rewriters.rewriter_utils import collect_env

    def sdpa_rewriter():
        records = dict(FUNCTION_REWRITER._registry.get_records(
            collect_env(Backend.ONNXRUNTIME, IR.ONNX)))
        return records['torch.nn.functional.scaled_dot_product_attention']['_object']

    export = torch.onnx.export
    assert not hasattr(opset9, '_cast_Long')  # removed by torch: why the shim exists
    assert sdpa_rewriter() is not scaled_dot_product_attention__onnxruntime
    with pytest.raises(KeyError), mmdeploy_compat():
        assert torch.onnx.export is not export and torch.onnx.export.__wrapped__ is export
        assert opset9._cast_Long is not None
        assert sdpa_rewriter() is scaled_dot_product_attention__onnxruntime
        raise KeyError('undone also on an error')
    assert torch.onnx.export is export and not hasattr(opset9, '_cast_Long')
    assert sdpa_rewriter() is not scaled_dot_product_attention__onnxruntime


@pytest.mark.parametrize('deploy_config', DEPLOY_CONFIGS,
                         ids=[osp.relpath(p, DEPLOY) for p in DEPLOY_CONFIGS])
def test_deploy_config_loads_with_its_models(deploy_config):
    users = [m for m, d in PAIRS.items() if d == deploy_config] or (
        [CLASSIFIER] if deploy_config == CLS_BATCH_CFG else [])
    assert users, f'{deploy_config} is used by no test'
    for model_config in users:
        deploy_cfg, _ = load_configs(deploy_config, model_config)
        assert deploy_cfg.backend_config.type == 'onnxruntime'
        assert len(deploy_cfg.onnx_config.input_shape) == 2


def test_bad_pairs_and_existing_files_are_refused(tmp_path, monkeypatch):
    dyn = write_config(tmp_path / 'dyn.py', f'_base_ = [{SEG_CFG!r}]\nonnx_config = dict('
                       "dynamic_axes=dict(input={0: 'batch', 2: 'h', 3: 'w'}))\n")
    with pytest.raises(ValueError, match='dynamic H / W is refused'):
        load_configs(dyn, SEM_FPN)
    assert 'static deploy config per input size' in MMDEPLOY_DYNAMIC_HW_ERROR
    trt = write_config(tmp_path / 'trt.py', f"_base_ = [{SEG_CFG!r}]\n"
                       "backend_config = dict(type='tensorrt')\n")
    with pytest.raises(ValueError, match="must be 'onnxruntime', got 'tensorrt'"):
        load_configs(trt, SEM_FPN)
    with pytest.raises(ValueError, match="deploy config is for 'mmseg'.*'mmdet' config"):
        load_configs(SEG_CFG, RETINANET)
    with pytest.raises(ValueError, match='has mask head: use an instance-seg deploy config'):
        load_configs(DET_CFG, MASK_RCNN)
    with pytest.raises(ValueError, match='has no mask head: use a detection deploy config'):
        load_configs(INS_CFG, RETINANET)
    tiny = write_config(tmp_path / 'tiny.py', f'_base_ = [{SEG_CFG!r}]\n'
                        'onnx_config = dict(input_shape=[16, 64])\n')
    with pytest.raises(ValueError, match=r'two integers >= 32.*got \[16, 64\]'):
        load_configs(tiny, SEM_FPN)
    with pytest.raises(FileNotFoundError, match='missing.py'):
        load_configs(str(tmp_path / 'missing.py'), SEM_FPN)
    from mmevt import cli  # the mmevt-deploy command: user errors in one line, status 1
    monkeypatch.setattr(sys, 'argv', ['mmevt-deploy', str(tmp_path / 'missing.py'), SEM_FPN])
    with pytest.raises(SystemExit, match="deploy: error: config file '.*missing.py'"):
        cli.deploy()
    deploy_cfg, model_cfg = load_configs(SEG_CFG, SEM_FPN)
    (tmp_path / 'end2end.onnx').write_bytes(b'user data')
    with pytest.raises(FileExistsError, match='--overwrite'):
        export_mmdeploy(deploy_cfg, model_cfg, None, default_image(), str(tmp_path))
    assert (tmp_path / 'end2end.onnx').read_bytes() == b'user data'


def _small(deploy_config: str, tmp_path) -> str:
    return write_config(tmp_path / 'deploy.py', f'_base_ = [{deploy_config!r}]\n'
                        f'onnx_config = dict(input_shape={SMALL!r})\n')


def _tamed_checkpoint(deploy_cfg, model_cfg, path) -> str:
    """Random weights with the box-regression layers scaled by 0.1 (so boxes stay inside the
    image, as a trained detector's do; random deltas collapse most boxes onto the border,
    where a near-tie decides which empty box survives)."""
    from mmdeploy.apis import build_task_processor
    torch.manual_seed(0)
    model = build_task_processor(model_cfg, deploy_cfg, 'cpu').build_pytorch_model()
    state = {k: v * 0.1 if '_reg.' in k else v for k, v in model.state_dict().items()}
    assert sum('_reg.' in k for k in state) >= 2
    torch.save({'state_dict': state}, path)
    return str(path)


FAMILIES = [RETINANET, MASK_RCNN, CASCADE, SEM_FPN, UPERNET]


@pytest.mark.e2e
@pytest.mark.parametrize('model_config', FAMILIES,
                         ids=['retinanet', 'mask-rcnn', 'cascade-mask-rcnn', 'semantic-fpn',
                              'upernet'])
def test_family_exports_and_matches_pytorch(tmp_path, model_config):
    """mmdeploy's torch2onnx under our compat module, then onnxruntime on the photograph
    against PyTorch running the same program (verify raises beyond TOLERANCES): boxes,
    scores, labels and 28 x 28 masks, or the class map; and against the toolkit's own
    predict where mmdeploy's post-processing is the toolkit's."""
    deploy_cfg, model_cfg = load_configs(_small(PAIRS[model_config], tmp_path), model_config,
                                         TINY[model_config])
    ckpt = None
    if model_cfg.default_scope == 'mmdet':
        ckpt = _tamed_checkpoint(deploy_cfg, model_cfg, tmp_path / 'det.pth')
    out = export_mmdeploy(deploy_cfg, model_cfg, ckpt, default_image(), str(tmp_path / 'work'))
    result = verify_mmdeploy(out, deploy_cfg, model_cfg, ckpt, default_image())
    print(osp.basename(model_config), result)
    graph, toolkit = result['graph'], result['toolkit']
    if 'detections' in graph:  # the comparison is not empty
        assert graph['matched'] >= 20 and graph['unmatched'] == 0
        assert ('mask' in graph) == (PAIRS[model_config] == INS_CFG)
        if model_config == RETINANET:  # one stage: mmdeploy's NMS is mmdet's
            assert toolkit['unmatched'] == 0 and toolkit['matched'] >= 20
    else:  # segmentors: the toolkit's inference is the graph's (our adaptive pooling)
        assert graph['class_map'] <= TOLERANCES['class_map']
        assert toolkit['class_map'] <= TOLERANCES['class_map']


@pytest.mark.e2e
def test_tool_deploys_a_classifier_with_a_dynamic_batch(tmp_path):
    """The command line with a checkpoint: its weights are in the graph, batch 1 and 2 match
    PyTorch, an existing file is kept."""
    import onnx
    from onnx import numpy_helper
    deploy_config = _small(CLS_BATCH_CFG, tmp_path)
    deploy_cfg, model_cfg = load_configs(deploy_config, CLASSIFIER, TINY[CLASSIFIER])
    from mmdeploy.apis import build_task_processor
    torch.manual_seed(1)
    model = build_task_processor(model_cfg, deploy_cfg, 'cpu').build_pytorch_model()
    torch.save({'state_dict': model.state_dict()}, tmp_path / 'cls.pth')
    # the test pipeline's 224 crop is the graph's input size: a 128 crop here
    options = [f'{k}={v}' for k, v in TINY[CLASSIFIER].items()] + [
        'test_pipeline.1.scale=146', 'test_pipeline.2.crop_size=128']
    args = ['tools/deployment/deploy.py', deploy_config, CLASSIFIER, str(tmp_path / 'cls.pth'),
            '--work-dir', str(tmp_path / 'work'), '--verify', '--seed', '5',
            '--benchmark', '2', '--threads', '1', '--jsonl', str(tmp_path / 'deploy.jsonl'),
            '--cfg-options', *options]
    log = run_tool(*args)
    assert 'verified at batch [1, 2]' in log, log[-3000:]
    timing = re.search(r'latency at \(128, 128\), 1 thread\(s\), median of 2: onnxruntime '
                       r'([\d.]+) ms, PyTorch ([\d.]+) ms', log)
    assert timing and float(timing[1]) > 0 and float(timing[2]) > 0, log[-2000:]
    # --jsonl: the printed numbers as a records row, which the docs' deploy table shows
    deploy_section = load_tool('tools/analysis/records_to_docs.py').deploy_section
    from mmevt.analysis.records import read_rows
    (row, ) = read_rows(str(tmp_path / 'deploy.jsonl'))
    assert row['config'] == osp.relpath(CLASSIFIER, REPO) and row['shape'] == [128, 128]
    assert (f"{row['ort_ms']:.1f}", f"{row['torch_ms']:.1f}") == (timing[1], timing[2])
    assert row['graph']['top1'] == 0 and row['batches'] == [1, 2] and row['threads'] == 1
    assert row['cfg_options']['test_pipeline.2.crop_size'] == 128  # the run's overrides too
    assert deploy_section([row])[-1].startswith(f"| `{row['config']}` | 128 x 128 | 1 |")
    assert "onnxruntime vs mmpretrain's own predict: probability" in log
    graph = onnx.load(str(tmp_path / 'work' / 'end2end.onnx')).graph
    dims = [d.dim_param or d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert isinstance(dims[0], str) and dims[1:] == [3, 128, 128]
    weights = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    torch.testing.assert_close(torch.from_numpy(weights['head.fc.weight']),
                               model.head.fc.weight.detach())  # seed 1's, not --seed 5's
    again = run_tool(*args, check=False)
    assert again.returncode == 1 and 'pass --overwrite to replace it' in again.stdout
