"""mmdet: each detector family end to end on generated COCO data, inferencer, tools."""
import glob
import os.path as osp

import pytest
import torch

from helpers import CONFIGS, MIXED_MIXERS, run_tool, write_config
from det_tiny import CASCADE_OPTS, tiny_det_config

pytestmark = pytest.mark.e2e  # every test here runs the tools in a subprocess

FAMILIES = {
    'cascade': osp.join(CONFIGS, 'det', 'cascade_rcnn',
                        'cascade-mask-rcnn_evt-t_fpn_ms-3x_coco.py'),
    'retinanet': osp.join(CONFIGS, 'det', 'retinanet', 'retinanet_evt-t_fpn_1x_coco.py'),
    'mask_rcnn_3x': osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_ms-3x_coco.py'),
}


@pytest.fixture(scope='module')
def trained(shapes_root, tmp_path_factory):
    out = {}
    for family, base in FAMILIES.items():
        tmp = tmp_path_factory.mktemp(family)
        kind = family if family != 'mask_rcnn_3x' else 'mask_rcnn'
        extra = ''
        if family == 'cascade':  # routing / external / 2D windows inside a detector
            extra = f"model['backbone']['mixers'] = {MIXED_MIXERS}"
        if family == 'mask_rcnn_3x':  # keep the multi-scale resize, at demo scale
            extra = ("train_pipeline[2] = dict(type='RandomChoiceResize', "
                     "scales=[(128, 64), (128, 96)], keep_ratio=True)\n"
                     "train_dataloader['dataset']['pipeline'] = train_pipeline")
        cfg = write_config(tmp / f'{family}.py', tiny_det_config(
            base, shapes_root, str(tmp / 'work'), family=kind, extra=extra))
        opts = CASCADE_OPTS if family == 'cascade' else []
        out[family] = (cfg, str(tmp / 'work'), run_tool('tools/train.py', cfg, *opts), opts)
    return out


@pytest.mark.parametrize('family', list(FAMILIES))
def test_family_trains_and_tests(trained, family, tmp_path):
    cfg, work, log, opts = trained[family]
    assert 'Epoch(train) [1][2/2]' in log
    out = run_tool('tools/test.py', cfg, osp.join(work, 'epoch_1.pth'), '--work-dir',
                   str(tmp_path), *opts)
    assert 'coco/bbox_mAP:' in out
    assert ('coco/segm_mAP:' in out) == (family != 'retinanet')


def test_det_inferencer_saves_a_visualisation(trained, shapes_root, tmp_path):
    import mmevt  # noqa: F401
    from mmdet.apis import DetInferencer
    cfg, work, _, _ = trained['mask_rcnn_3x']
    inferencer = DetInferencer(model=cfg, weights=osp.join(work, 'epoch_1.pth'), device='cpu')
    img = osp.join(shapes_root, 'images', 'validation', '000000.jpg')
    result = inferencer(img, out_dir=str(tmp_path), no_save_pred=False)
    pred = result['predictions'][0]
    assert len(pred['bboxes']) == len(pred['scores']) and 'masks' in pred
    assert glob.glob(str(tmp_path / 'vis' / '*.jpg'))
    assert glob.glob(str(tmp_path / 'preds' / '*.json'))


def test_mmdet_get_flops_tool_runs_on_our_config(trained, tmp_path):
    from mmevt.apis import toolkit_tool_path
    cfg, _, _, _ = trained['retinanet']
    tool = osp.join(osp.dirname(toolkit_tool_path('mmdet', 'train')), 'analysis_tools',
                    'get_flops.py')
    out = run_tool(tool, cfg, '--num-images', '2')
    assert 'Flops:' in out and 'Params:' in out


def test_backbone_init_from_a_full_detector_checkpoint(trained):
    from mmevt.models import EVT
    _, work, _, _ = trained['retinanet']
    ckpt = osp.join(work, 'epoch_1.pth')
    state = torch.load(ckpt, map_location='cpu')['state_dict']
    model = EVT('evt-test', out_indices=(1, 2, 3),
                init_cfg=dict(type='Pretrained', checkpoint=ckpt, prefix='backbone.'))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.init_weights()
    after = model.state_dict()
    assert any(not torch.equal(after[k], before[k]) for k in after)
    for k, v in after.items():
        torch.testing.assert_close(v, state[f'backbone.{k}'], msg=k)


def test_missing_pretrained_checkpoint_is_a_clear_error(shapes_root, tmp_path):
    # the real configs point at checkpoints/<arch>_in1k.pth; here that file does not exist
    base = osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_1x_coco.py')
    cfg = write_config(tmp_path / 'cfg.py', tiny_det_config(
        base, shapes_root, str(tmp_path / 'work'),
        extra="model['backbone']['init_cfg'] = dict(type='Pretrained', "
              "checkpoint='checkpoints/evt-t_in1k.pth', prefix='backbone.')"))
    out = run_tool('tools/train.py', cfg, check=False)
    assert out.returncode != 0
    assert "init_cfg.checkpoint of EVT: checkpoint file 'checkpoints/evt-t_in1k.pth' " \
           'does not exist' in out.stdout
