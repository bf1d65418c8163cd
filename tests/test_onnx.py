"""ONNX export (torch's dynamo exporter) of a classifier, a backbone and a Semantic FPN
segmentor: one file per input size with a dynamic batch, onnxruntime equal to PyTorch."""
import os.path as osp
import re

import onnx  # requirements/tests.txt: onnx, onnxscript (the exporter), onnxruntime
import onnxruntime as ort
import pytest
import torch

from helpers import CONFIGS, run_tool
from mmevt.deploy.onnx_export import export_onnx, load_model
from mmevt.deploy.parity import verify_onnx
from mmevt.deploy.shapes import ONNX_DYNAMIC_HW_ERROR, check_shape
from mmevt.deploy.timing import time_tensor_mode

CLS = osp.join(CONFIGS, 'cls', 'evt', 'evt-t_8xb128_in1k.py')
DET = osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_1x_coco.py')
SEG = osp.join(CONFIGS, 'demo', 'fpn_evt-demo_shapes.py')  # Semantic FPN, small EVT
# Small archs keep the exports to seconds; the graph's kinds of layers are EVT-T's. At
# 64 x 96 the stage grids are 16x24 .. 2x3: the last group is partial in the grouped
# stages, so the padding branch is in the graph.
TINY_CLS = {'model.backbone.arch': 'evt-test', 'model.neck.in_channels': 128}
CASES = [  # config, cfg options, (H, W), output shapes at batch 2
    (CLS, TINY_CLS, (64, 96), [(2, 1000)]),
    (SEG, None, (128, 96), [(2, 4, 32, 24)]),
]
def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


@pytest.mark.parametrize('config,options,shape,out_shapes', CASES,
                         ids=['classifier', 'semantic-fpn'])
def test_export_matches_pytorch_with_a_dynamic_batch(tmp_path, config, options, shape,
                                                      out_shapes):
    torch.manual_seed(0)
    model, kind, _ = load_model(config, cfg_options=options)
    out = export_onnx(model, kind, shape, str(tmp_path / 'model.onnx'))
    graph = onnx.load(out).graph
    dims = _dims(graph.input[0])
    assert isinstance(dims[0], str) and dims[1:] == [3, *shape]  # batch symbolic, H W fixed
    assert len(graph.output) == len(out_shapes)
    # batch 1 and 2 against PyTorch eager; verify_onnx raises above 1e-4
    assert verify_onnx(out, model, kind, shape, batches=(1, 2), atol=1e-4) < 1e-4
    session = ort.InferenceSession(out, providers=['CPUExecutionProvider'])
    got = session.run(None, {'input': torch.randn(2, 3, *shape).numpy()})
    assert [tuple(g.shape) for g in got] == out_shapes
    with pytest.raises(Exception, match='(?i)dimension|shape'):  # H, W are baked in
        session.run(None, {'input': torch.randn(1, 3, shape[0] + 32, shape[1]).numpy()})
    timing = time_tensor_mode(out, model, kind, shape, rounds=2, threads=1)
    assert timing['threads'] == 1 and timing['ort_ms'] > 0 and timing['torch_ms'] > 0


def test_export_refuses_what_it_cannot_do(tmp_path):
    with pytest.raises(ValueError, match='dynamic H / W cannot be exported'):
        export_onnx(None, 'backbone', (64, 64), str(tmp_path / 'x.onnx'), dynamic_hw=True)
    assert 'one file per input size' in ONNX_DYNAMIC_HW_ERROR
    for bad in ([16, 64], [64], [64.5, 64]):
        with pytest.raises(ValueError, match='two integers H W >= 32'):
            check_shape(bad)
    with pytest.raises(ValueError, match='mmdet detector.*--backbone-only'):
        load_model(DET)
    (tmp_path / 'mine.onnx').write_bytes(b'user data')
    with pytest.raises(FileExistsError, match='--overwrite'):
        export_onnx(None, 'backbone', (64, 64), str(tmp_path / 'mine.onnx'))
    assert (tmp_path / 'mine.onnx').read_bytes() == b'user data'


class BatchBranch(torch.nn.Module):
    """A branch on the batch size: torch.onnx's strict retry fixes the batch to 2."""

    def forward(self, x):
        return (x * 2 if x.shape[0] == 2 else x - 1, )


def test_export_refuses_a_graph_whose_batch_was_fixed(tmp_path):
    with pytest.raises(RuntimeError, match='fixed the batch dimension to 2'):
        export_onnx(BatchBranch(), 'backbone', (32, 32), str(tmp_path / 'b.onnx'))
    assert list(tmp_path.iterdir()) == []  # no file, not even a temporary one


def test_checkpoint_weights_are_exported(tmp_path):
    model, kind, _ = load_model(SEG)
    state = {k: v + 0.05 if v.is_floating_point() else v for k, v in model.state_dict().items()}
    torch.save({'state_dict': state}, tmp_path / 'seg.pth')
    loaded, _, pre = load_model(SEG, str(tmp_path / 'seg.pth'))
    assert pre['mean'] == [123.675, 116.28, 103.53]  # reported: preprocessing is outside
    for k, v in loaded.state_dict().items():
        torch.testing.assert_close(v, state[k], rtol=0, atol=0, msg=k)


@pytest.mark.e2e
def test_tool_exports_a_backbone_per_size_and_keeps_existing_files(tmp_path):
    # RMT's decomposed MaSA and full MaSA through the command line, --verify at batch 1, 2
    args = ['tools/deployment/pytorch2onnx.py', DET, '--backbone-only', '--shape', '64', '64',
            '--shape', '64', '96', '--out-dir', str(tmp_path / 'out'), '--verify',
            '--jsonl', str(tmp_path / 'onnx.jsonl'),
            '--cfg-options', 'model.backbone.arch=rmt-test']
    log = run_tool(*args)
    # --jsonl: one records row per file, the printed difference
    from mmevt.analysis.records import read_rows
    rows = read_rows(str(tmp_path / 'onnx.jsonl'))
    assert [r['shape'] for r in rows] == [[64, 64], [64, 96]] and rows[0]['kind'] == 'backbone'
    printed = re.findall(r'max \|onnxruntime - PyTorch\| = (\S+) at', log)
    assert [f"{r['max_abs_diff']:.2e}" for r in rows] == printed
    tmp_path = tmp_path / 'out'
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ['mask-rcnn_evt-t_fpn_1x_coco_backbone_64x64.onnx',
                     'mask-rcnn_evt-t_fpn_1x_coco_backbone_64x96.onnx'], files
    assert log.count('verified') == 2 and 'max |onnxruntime - PyTorch|' in log
    for name, (h, w) in zip(files, [(64, 64), (64, 96)]):
        graph = onnx.load(str(tmp_path / name)).graph
        dims = _dims(graph.input[0])
        assert isinstance(dims[0], str) and dims[1:] == [3, h, w]
        assert [_dims(o)[1:] for o in graph.output] == [
            [16, h // 4, w // 4], [32, h // 8, w // 8], [64, h // 16, w // 16],
            [128, h // 32, w // 32]]
    stamp = [p.stat().st_mtime_ns for p in sorted(tmp_path.iterdir())]
    again = run_tool(*args, check=False)
    assert again.returncode == 1 and 'pass --overwrite to replace them' in again.stdout
    assert [p.stat().st_mtime_ns for p in sorted(tmp_path.iterdir())] == stamp
    dyn = run_tool('tools/deployment/pytorch2onnx.py', SEG, '--dynamic-hw', check=False)
    assert dyn.returncode == 1 and 'dynamic H / W cannot be exported' in dyn.stdout


@pytest.mark.parametrize('hw', [(100, 100), (72, 136)], ids=['100x100', '72x136'])
def test_torchscript_export_at_opset_11_with_padded_groups(tmp_path, hw):
    """mmdeploy's exporter (TorchScript, ``dynamo=False``) at mmdeploy's default opset 11, at
    sizes whose stage grids leave the last 1D group partial (25 x 25 = 625 tokens in groups
    of 16; 18 x 34 = 612): the group count must be an exact ceil in the traced graph (a
    negated floor division exports as a truncating ``Div`` and the padding goes negative),
    and the padded slots' coordinates need no integer ``Clip`` (not allowed at opset 11).
    The reference attention path: the TorchScript exporter has SDPA from opset 14 only."""
    from mmevt.models import EVT
    from mmevt.ops import has_padding
    assert any(has_padding((hw[0] // s, hw[1] // s), 16, 'group') for s in (4, 8, 16))
    torch.manual_seed(0)
    model = EVT('evt-test', attn_impl='reference').eval()
    x = torch.randn(1, 3, *hw)
    out = str(tmp_path / 'evt.onnx')
    with torch.no_grad():
        expected = model(x)
        torch.onnx.export(model, (x, ), out, dynamo=False, opset_version=11,
                          input_names=['input'])
    ops = {n.op_type for n in onnx.load(out).graph.node}
    assert 'Clip' not in ops
    session = ort.InferenceSession(out, providers=['CPUExecutionProvider'])
    got = session.run(None, {'input': x.numpy()})
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-4, rtol=1e-4)
