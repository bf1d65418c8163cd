"""The demo: generated data loads in the toolkits' datasets, and a short demo learns."""
import os.path as osp
import re

import numpy as np
import pytest
import torch

from helpers import load_tool, run_tool

demo = load_tool('tools/demo.py')


@pytest.fixture(scope='module')
def demo_data(tmp_path_factory):
    from mmevt.datasets import generate_shapes
    root = str(tmp_path_factory.mktemp('demo_data'))
    generate_shapes(root, num_train=96, num_val=16, img_size=(128, 128), seed=1)
    return root


def test_generator_is_deterministic_and_never_overwrites(tmp_path):
    from mmevt.datasets import generate_shapes
    a, b = tmp_path / 'a', tmp_path / 'b'
    generate_shapes(str(a), 3, 2, (64, 96), seed=5)
    generate_shapes(str(b), 3, 2, (64, 96), seed=5)
    for rel in ('annotations/instances_training.json', 'annotations/training/000002.png',
                'images/validation/000001.jpg'):
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    generate_shapes(str(a), 3, 2, (64, 96), seed=5)  # same settings: reused
    with pytest.raises(FileExistsError, match='holds a shapes dataset made with'):
        generate_shapes(str(a), 4, 2, (64, 96), seed=5)
    with pytest.raises(ValueError, match=r'img_size must be at least 32 x 32, got \(16, 64\)'):
        generate_shapes(str(tmp_path / 'c'), 1, 1, (16, 64))


def test_generated_data_loads_in_coco_and_ade20k_datasets(demo_data):
    import mmevt  # noqa: F401
    from mmdet.datasets import CocoDataset
    from mmseg.datasets import ADE20KDataset
    coco = CocoDataset(data_root=demo_data, ann_file='annotations/instances_validation.json',
                       data_prefix=dict(img='images/validation/'), pipeline=[],
                       metainfo=dict(classes=('circle', 'square', 'triangle')))
    assert len(coco) == 16
    inst = coco[0]['instances']
    assert inst and all(0 <= i['bbox_label'] < 3 and len(i['mask'][0]) >= 6 for i in inst)
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmseg'):  # mmseg's LoadAnnotations
        ade = ADE20KDataset(data_root=demo_data,
                            data_prefix=dict(img_path='images/validation',
                                             seg_map_path='annotations/validation'),
                            pipeline=[dict(type='LoadImageFromFile'),
                                      dict(type='LoadAnnotations', reduce_zero_label=True)])
    assert len(ade) == 16
    seg = ade[0]['gt_seg_map']
    assert set(np.unique(seg)) <= {0, 1, 2, 3} and (seg == 0).any() and (seg > 0).any()


def _untrained_checkpoint(cfg_path, out):
    """The config's model, freshly initialised, saved as a checkpoint."""
    import mmevt  # noqa: F401
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    import importlib
    cfg = Config.fromfile(cfg_path)
    registry = importlib.import_module(f'{cfg.default_scope}.registry').MODELS
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        torch.manual_seed(0)
        model = registry.build(cfg.model)
    model.init_weights()
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, out)
    return str(out)


def _losses(log):
    return [float(x) for x in re.findall(r'\(train\).*?\s+loss: ([\d.]+)', log)]


def _learns(cfg, opts, schedule, ckpt, metric, tmp_path, test_opts=()):
    """Train ``cfg`` on ``schedule``; the loss curve, then ``metric`` of the trained and of
    an untrained model, both evaluated by ``tools/test.py``."""
    work = str(tmp_path / 'train')
    losses = _losses(run_tool('tools/train.py', cfg, '--work-dir', work, *opts, *schedule))

    def evaluate(path, name):
        log = run_tool('tools/test.py', cfg, path, '--work-dir', str(tmp_path / name), *opts,
                       *test_opts)
        return demo.last_metrics(log, [metric])[metric]

    untrained = _untrained_checkpoint(cfg, tmp_path / 'untrained.pth')
    return losses, evaluate(osp.join(work, ckpt), 't1'), evaluate(untrained, 't0')


@pytest.mark.e2e
def test_short_detection_demo_learns(demo_data, tmp_path):
    losses, trained, untrained = _learns(
        demo.DET_CFG, demo.det_options(demo_data),
        ['train_cfg.max_epochs=6', 'train_cfg.val_interval=6',
         'default_hooks.logger.interval=4', 'default_hooks.checkpoint.interval=6'],
        'epoch_6.pth', 'coco/bbox_mAP', tmp_path, ['model.test_cfg.rcnn.score_thr=0.0'])
    assert len(losses) >= 4 and losses[-1] < 0.7 * losses[0], losses
    assert trained >= untrained + 0.05, (trained, untrained)


@pytest.mark.e2e
def test_short_segmentation_demo_learns(demo_data, tmp_path):
    losses, trained, untrained = _learns(
        demo.SEG_CFG, demo.seg_options(demo_data),
        ['train_cfg.max_iters=240', 'train_cfg.val_interval=240',
         'default_hooks.logger.interval=20', 'default_hooks.checkpoint.interval=240',
         'param_scheduler.1.end=240'],
        'iter_240.pth', 'mIoU', tmp_path)
    assert len(losses) >= 4 and losses[-1] < 0.7 * losses[0], losses
    baseline = demo.background_only_miou(demo_data)
    assert trained > max(untrained, baseline) + 5, (trained, untrained, baseline)


@pytest.mark.e2e
def test_generator_command_line(tmp_path):
    out = run_tool('tools/misc/make_shapes.py', str(tmp_path / 'det'), '--num-train', '2',
                   '--num-val', '1', '--size', '64', '96')
    assert 'coco_training:' in out
    img = tmp_path / 'det' / 'images' / 'training' / '000001.jpg'
    from PIL import Image
    assert Image.open(img).size == (96, 64)
    out = run_tool('tools/misc/make_shapes.py', str(tmp_path / 'cls'), '--classification',
                   '--num-train', '1', '--num-val', '1', '--size', '48', '48')
    assert (tmp_path / 'cls' / 'meta' / 'train.txt').read_text().count('\n') == 6
    bad = run_tool('tools/misc/make_shapes.py', str(tmp_path / 'det'), '--num-train', '3',
                   check=False)
    assert bad.returncode != 0 and 'holds a shapes dataset made with' in bad.stdout
