"""mmseg: Semantic FPN and UperNet end to end on generated ADE20K-layout data."""
import glob
import os.path as osp

import pytest

from helpers import CONFIGS, MIXED_MIXERS, run_tool, write_config
from seg_tiny import tiny_seg_config

pytestmark = pytest.mark.e2e  # every test here runs the tools in a subprocess

BASES = {
    'sem_fpn': osp.join(CONFIGS, 'seg', 'sem_fpn', 'fpn_evt-t_8xb2-80k_ade20k-512x512.py'),
    'upernet': osp.join(CONFIGS, 'seg', 'upernet', 'upernet_evt-t_8xb2-160k_ade20k-512x512.py'),
}
# UperNet runs the alternative token mixers (routing / external / 2D windows)
MIXERS = {'sem_fpn': 'None', 'upernet': MIXED_MIXERS}


@pytest.fixture(scope='module')
def trained(shapes_root, tmp_path_factory):
    out = {}
    for family in BASES:
        tmp = tmp_path_factory.mktemp(family)
        cfg = write_config(tmp / f'{family}.py',
                           tiny_seg_config(BASES[family], shapes_root, str(tmp / 'work'), family,
                                           mixers=MIXERS[family]))
        out[family] = (cfg, str(tmp / 'work'), run_tool('tools/train.py', cfg))
    return out


@pytest.mark.parametrize('family', list(BASES))
def test_trains_and_tests_with_ade20k_metrics(trained, family, tmp_path):
    cfg, work, log = trained[family]
    assert 'Iter(train) [2/2]' in log and 'decode.loss_ce' in log
    out = run_tool('tools/test.py', cfg, osp.join(work, 'iter_2.pth'), '--work-dir',
                   str(tmp_path))
    for metric in ('aAcc:', 'mIoU:', 'mAcc:'):
        assert metric in out


@pytest.mark.parametrize('crop,stride', [((64, 64), (48, 48)), ((80, 56), (37, 41))])
def test_slide_inference_on_a_non_square_image(trained, tmp_path, crop, stride):
    cfg, work, _ = trained['upernet']
    out = run_tool('tools/test.py', cfg, osp.join(work, 'iter_2.pth'), '--work-dir',
                   str(tmp_path), '--cfg-options', 'model.test_cfg.mode=slide',
                   f'model.test_cfg.crop_size={crop}', f'model.test_cfg.stride={stride}')
    assert 'mIoU:' in out


def test_tta_multiscale_flip(trained, tmp_path):
    cfg, work, _ = trained['sem_fpn']
    out = run_tool('tools/test.py', cfg, osp.join(work, 'iter_2.pth'), '--work-dir',
                   str(tmp_path), '--tta')
    assert 'mIoU:' in out


def test_mmseg_inferencer_runs_on_our_config(trained, shapes_root, tmp_path):
    import mmevt  # noqa: F401
    from mmseg.apis import MMSegInferencer
    cfg, work, _ = trained['sem_fpn']
    inferencer = MMSegInferencer(model=cfg, weights=osp.join(work, 'iter_2.pth'),
                                 device='cpu')
    img = osp.join(shapes_root, 'images', 'validation', '000001.jpg')
    result = inferencer(img, out_dir=str(tmp_path))
    assert result['predictions'].shape == (96, 128)
    assert glob.glob(str(tmp_path / 'vis' / '*'))
