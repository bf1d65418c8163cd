"""Detection TTA: the RetinaNet configs carry mmdet's tta_model / tta_pipeline and
``tools/test.py --tta`` runs them (box merging across scales and flips)."""
import glob
import os.path as osp
import pickle

import pytest
import torch

from det_tiny import tiny_det_config
from helpers import CONFIGS, load_config, run_tool, write_config

RETINANET = osp.join(CONFIGS, 'det', 'retinanet', 'retinanet_evt-t_fpn_1x_coco.py')
MAX_PER_IMG = 7  # below what an untrained RetinaNet keeps per view: shows the merge ran
# mmdet's three scales (1333 x 800, 666 x 400, 2000 x 1200) shrunk to the 128 x 96 images
SMALL_TTA = f'''
tta_model = dict(tta_cfg=dict(max_per_img={MAX_PER_IMG}))
tta_pipeline = _base_.tta_pipeline
tta_pipeline[1]['transforms'][0] = [
    dict(type='Resize', scale=s, keep_ratio=True) for s in [(128, 96), (64, 48), (192, 144)]]
'''


@pytest.mark.parametrize('path', sorted(glob.glob(osp.join(CONFIGS, 'det', 'retinanet', '*.py'))),
                         ids=lambda p: osp.basename(p)[:-3])
def test_every_retinanet_config_has_mmdets_tta(path):
    cfg = load_config(path)
    assert cfg.tta_model == dict(
        _scope_='mmdet', type='DetTTAModel',
        tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100))
    load, tta = cfg.tta_pipeline
    assert (load.type, tta.type) == ('LoadImageFromFile', 'TestTimeAug')
    resizes, flips, (pack, ) = tta.transforms
    assert [r.scale for r in resizes] == [(1333, 800), (666, 400), (2000, 1200)]
    assert [f.prob for f in flips] == [1., 0.]
    assert 'flip_direction' in pack.meta_keys


@pytest.mark.e2e
def test_tools_test_tta_runs_on_retinanet(shapes_root, tmp_path):
    from mmengine.registry import DefaultScope
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    cfg_path = write_config(tmp_path / 'retinanet.py', tiny_det_config(
        RETINANET, shapes_root, str(tmp_path / 'work'), family='retinanet', extra=SMALL_TTA))
    # an untrained detector is enough to test the plumbing (no training run)
    register_all_modules(init_default_scope=False)
    with DefaultScope.overwrite_default_scope('mmdet'):
        torch.manual_seed(0)
        model = MODELS.build(load_config(cfg_path).model)
    ckpt = str(tmp_path / 'untrained.pth')
    torch.save({'state_dict': model.state_dict()}, ckpt)
    out = str(tmp_path / 'preds.pkl')
    log = run_tool('tools/test.py', cfg_path, ckpt, '--tta', '--out', out,
                   '--work-dir', str(tmp_path / 'test'))
    assert 'coco/bbox_mAP:' in log
    assert 'Cannot find ``tta_model``' not in log  # the config's, not mmdet's defaults
    dumped, = glob.glob(str(tmp_path / 'test' / '*' / 'vis_data' / 'config.py'))
    dumped = ''.join(open(dumped).read().split())  # the runner's dump, yapf-formatted
    assert 'DetTTAModel' in dumped and 'scale=(192,144,)' in dumped  # the small views ran
    with open(out, 'rb') as f:
        preds = pickle.load(f)
    assert len(preds) == 4  # the validation images
    for pred in preds:
        boxes = pred['pred_instances']['bboxes']
        assert len(boxes) == MAX_PER_IMG  # merged, then cut to the TTA's max_per_img
        # boxes come back in the original image's coordinates (128 x 96)
        assert boxes[:, 2].max() <= 128 + 1e-3 and boxes[:, 3].max() <= 96 + 1e-3
