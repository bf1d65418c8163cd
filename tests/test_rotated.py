"""mmrotate (both stacks: mmrotate-dev on upstream, onedl-mmrotate on the fork): the DOTA
configs, the installed package, mmcv's rotated ops on the CPU, the generated DOTA set split by
mmrotate's own img_split.py, and the Oriented R-CNN demo end to end with mmrotate's own
tools/train.py and tools/test.py."""
import glob
import os
import os.path as osp
import re
import sys
from importlib import metadata

import numpy as np
import pytest
import torch

from helpers import (CONFIGS, current_stack, demo_config_on, last_metric, load_config,
                     load_tool, run_tool, save_untrained, unscoped, write_config)

from mmevt.models.backbones import ARCH_FAMILIES, arch_zoo

ROTATED = osp.join(CONFIGS, 'rotated')
EVT_T = {
    'oriented_rcnn': ('oriented_rcnn/oriented-rcnn-le90_evt-t_fpn_1x_dota.py',
                      'mmrotate::oriented_rcnn/oriented-rcnn-le90_swin-tiny_fpn_1x_dota.py'),
    'roi_trans': ('roi_trans/roi-trans-le90_evt-t_fpn_1x_dota.py',
                  'mmrotate::roi_trans/roi-trans-le90_swin-tiny_fpn_1x_dota.py'),
    'rotated_retinanet': ('rotated_retinanet/rotated-retinanet-rbox-le90_evt-t_fpn_1x_dota.py',
                          'mmrotate::rotated_retinanet/'
                          'rotated-retinanet-rbox-le90_r50_fpn_1x_dota.py'),
}
DEMO = osp.join(CONFIGS, 'demo', 'oriented-rcnn-le90_evt-test_fpn_dota-shapes-128x128.py')
# the top-level names of our shared base (read through {{_base_.*}}) and of the recipes' own
# helper variables, which are not settings of the model or the run
HELPERS = re.compile(r'^(evt_|pretrained$|depths$|backbone_norm_multi$|backbone_embed_multi$|'
                     r'embed_multi$|custom_keys$|custom_imports$|angle_version$)')


def _settings(cfg) -> dict:
    return {k: v for k, v in unscoped(cfg.to_dict()).items() if not HELPERS.match(k)}


# ------------------------------------------------------------------ configs
@pytest.mark.parametrize('family', EVT_T)
def test_config_is_mmrotates_recipe_with_the_backbone_and_optimizer_rules_swapped(family):
    from mmevt.swap import load_src
    ours_path, recipe_src = EVT_T[family]
    ours = _settings(load_config(osp.join(ROTATED, ours_path)))
    recipe = _settings(load_src(recipe_src))
    model, recipe_model = ours.pop('model'), recipe.pop('model')
    optim, recipe_optim = ours.pop('optim_wrapper'), recipe.pop('optim_wrapper')
    assert ours == recipe  # data, schedule, runtime, evaluator: the recipe's
    for key in set(model) | set(recipe_model):
        if key not in ('backbone', 'neck'):
            assert model.get(key) == recipe_model.get(key), key
    stages = (1, 2, 3) if family == 'rotated_retinanet' else (0, 1, 2, 3)
    assert model['backbone'] == dict(
        type='EVT', arch='evt-t', drop_path_rate=0.1, out_indices=stages,
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/evt-t_in1k.pth',
                      prefix='backbone.'))
    widths = arch_zoo['evt-t']['embed_dims']
    assert model['neck'] == dict(recipe_model['neck'], in_channels=widths[stages[0]:],
                                 **(dict(start_level=0) if family == 'rotated_retinanet'
                                    else {}))
    # the Swin-T recipes' optimizer (the R50 RetinaNet recipe's SGD replaced by it)
    assert optim['optimizer'] == dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999),
                                      weight_decay=0.05)
    assert optim['clip_grad'] == recipe_optim['clip_grad'] == dict(max_norm=35, norm_type=2)
    assert optim['paramwise_cfg']['norm_decay_mult'] == 0.


def one_arch_a_width(*families: str) -> list:
    """The smallest arch of each width (``embed_dims``) in the arch zoo's ``families``."""
    picked = {}
    for family in families:
        for arch in ARCH_FAMILIES[family]:
            picked.setdefault((family, tuple(arch_zoo[arch]['embed_dims'])), arch)
    return list(picked.values())


# EVT-T / -B / -L and EVT-Swin-T / -B: the conv stem and the patch stem, with and without
# layer scale
@pytest.mark.parametrize('arch', one_arch_a_width('evt', 'evt-swin'))
def test_every_backbone_norm_gets_the_recipes_rule_for_any_arch(arch):
    # the recipe: the backbone at 0.1 x lr; no decay on any norm; so built by mmengine's own
    # optimizer constructor for the whole Oriented R-CNN model
    from mmengine.optim import build_optim_wrapper

    from mmevt.toolkits import build_model, toolkit_scope
    cfg = load_config(osp.join(ROTATED, EVT_T['oriented_rcnn'][0]))
    cfg.model.backbone.update(arch=arch, init_cfg=None, norm_cfg=dict(type='BN'))
    cfg.model.neck.in_channels = arch_zoo[arch]['embed_dims']
    model = build_model(cfg, seed=0)
    with toolkit_scope('mmrotate'):
        optim = build_optim_wrapper(model, cfg.optim_wrapper).optimizer
    group_of = {id(p): g for g in optim.param_groups for p in g['params']}
    norms = {f'{n}.{p}' for n, m in model.named_modules()
             if isinstance(m, (torch.nn.LayerNorm, torch.nn.modules.batchnorm._BatchNorm))
             for p, _ in m.named_parameters(recurse=False)}
    checked = 0
    for name, param in model.named_parameters():
        group = group_of[id(param)]
        in_backbone = name.startswith('backbone.')
        assert group['lr'] == pytest.approx(1e-5 if in_backbone else 1e-4), name
        if name in norms:
            assert group['weight_decay'] == 0., name
            checked += in_backbone
        elif in_backbone and param.ndim > 1:
            assert group['weight_decay'] == pytest.approx(0.05), name
    assert checked > 20  # every block's two norms, the stem's, the outputs'


def test_oriented_rcnn_reads_evts_four_maps_of_a_dota_patch():
    from mmevt.toolkits import build_model
    cfg = load_config(osp.join(ROTATED, EVT_T['oriented_rcnn'][0]))
    cfg.model.backbone.init_cfg = None
    model = build_model(cfg, seed=0, revert_sync_bn=True).eval()
    with torch.no_grad():
        feats = model.extract_feat(torch.randn(1, 3, 256, 256))
    assert [tuple(f.shape) for f in feats] == [(1, 256, 256 // s, 256 // s)
                                               for s in (4, 8, 16, 32, 64)]


# ------------------------------------------------------------------ the installed mmrotate
def test_mmrotate_is_the_stacks_package_and_owns_its_module_alone():
    import mmrotate
    dist, version = dict(upstream=('mmrotate-dev', '1.0.1'),
                         fork=('onedl-mmrotate', '1.2.1'))[current_stack()]
    assert metadata.version(dist) == mmrotate.__version__ == version
    owners = metadata.packages_distributions()['mmrotate']  # as the dist's files spell it
    assert [re.sub(r'[-_.]+', '-', o).lower() for o in owners] == [dist]
    text = open(mmrotate.__file__).read()
    if current_stack() == 'upstream':
        # the republish's one code difference from dev-1.x (docs/rotated.md)
        assert "mmdet_maximum_version = '3.4.0'" in text
        assert "mmcv_maximum_version = '2.1.0'" in text
    else:
        import faster_coco_eval
        assert 'assert' not in text and faster_coco_eval.__version__ == '1.8.0'
    # EVT is in mmrotate's registry, and mmrotate's detectors are found from it
    from mmrotate.registry import MODELS
    from mmevt.models import EVT
    assert MODELS.get('EVT') is EVT and MODELS.get('OrientedRPNHead') is not None


def test_rotated_ops_the_configs_use_run_on_the_cpu_forward_and_backward():
    from mmcv.ops import RoIAlignRotated, box_iou_rotated, nms_rotated
    boxes = torch.tensor([[20., 20., 16., 8., 0.3], [21., 20., 16., 8., 0.35],
                          [60., 60., 10., 30., -0.5]])
    ious = box_iou_rotated(boxes, boxes)
    assert torch.allclose(ious.diagonal(), torch.ones(3), atol=1e-4) and ious[0, 2] == 0
    _, keep = nms_rotated(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
    assert keep.tolist() == [0, 2]
    feats = torch.randn(1, 4, 32, 32, requires_grad=True)
    rois = torch.tensor([[0., 16., 16., 8., 4., 0.4]])
    out = RoIAlignRotated(7, 1., 2, clockwise=True)(feats, rois)
    out.sum().backward()
    assert out.shape == (1, 4, 7, 7) and feats.grad.abs().sum() > 0


def _call_on_cpu(op: str):
    import mmcv.ops as ops
    points, polygons = torch.rand(4, 18) * 10, torch.rand(4, 8) * 10
    calls = {
        'diff_iou_rotated_2d': lambda: ops.diff_iou_rotated_2d(torch.rand(1, 2, 5),
                                                               torch.rand(1, 2, 5)),
        'convex_giou': lambda: ops.convex_giou(points, polygons),
        'convex_iou': lambda: ops.convex_iou(points, polygons),
        'points_in_polygons': lambda: ops.points_in_polygons(torch.rand(4, 2), polygons),
        'min_area_polygons': lambda: ops.min_area_polygons(points),
        'riroi_align_rotated': lambda: ops.RiRoIAlignRotated(7, 1., 2, 8)(
            torch.rand(1, 8, 16, 16), torch.tensor([[0., 8., 8., 4., 4., 0.2]])),
    }
    return calls[op]()


def test_the_ops_the_swap_says_need_a_gpu_have_no_cpu_kernel():
    from mmevt.toolkits.mmrotate import GPU_ONLY_MODULES
    for op in sorted({op for ops in GPU_ONLY_MODULES.values() for op in ops}):
        with pytest.raises(RuntimeError, match='implementation for device cpu not found'):
            _call_on_cpu(op)


# ------------------------------------------------------------------ generated DOTA
def test_dota_generator_writes_labeltxt_and_never_overwrites(tmp_path):
    from mmevt.datasets import DOTA_CLASSES, generate_dota
    a, b = tmp_path / 'a', tmp_path / 'b'
    generate_dota(str(a), 2, 1, (128, 160), seed=3)
    paths = generate_dota(str(b), 2, 1, (128, 160), seed=3)
    for rel in ('train/labelTxt/P0001.txt', 'val/images/P0000.png'):
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    generate_dota(str(a), 2, 1, (128, 160), seed=3)  # the same settings: reused
    with pytest.raises(FileExistsError, match='holds a DOTA dataset made with'):
        generate_dota(str(a), 3, 1, (128, 160), seed=3)
    with pytest.raises(ValueError, match=r'img_size must be at least 64 x 64'):
        generate_dota(str(tmp_path / 'c'), 1, 1, (32, 128))
    with pytest.raises(ValueError, match='max_objects must be at least 1'):
        generate_dota(str(tmp_path / 'c'), 1, 1, max_objects=0)
    from PIL import Image
    objects = 0
    for txt in sorted(os.listdir(paths['train_labelTxt'])):
        lines = open(osp.join(paths['train_labelTxt'], txt)).read().splitlines()
        assert lines[:2] == ['imagesource:mmevt', 'gsd:0.5']  # DOTA v1.0's header
        w, h = Image.open(osp.join(paths['train_images'], txt[:-4] + '.png')).size
        assert (w, h) == (160, 128)
        for line in lines[2:]:
            *coords, label, difficulty = line.split()
            xy = torch.tensor([float(c) for c in coords]).view(4, 2)
            assert label in DOTA_CLASSES and difficulty == '0'
            assert (xy >= 0).all() and (xy[:, 0] < w).all() and (xy[:, 1] < h).all()
            objects += 1
    assert objects >= 2


def test_generator_command_line_writes_dota(tmp_path, capsys):
    make_shapes = load_tool('tools/misc/make_shapes.py')
    make_shapes.main([str(tmp_path), '--dota', '--num-train', '1', '--num-val', '1',
                      '--size', '64', '64'])
    assert 'train_labelTxt:' in capsys.readouterr().out
    assert (tmp_path / 'val' / 'labelTxt' / 'P0000.txt').is_file()
    with pytest.raises(SystemExit):
        make_shapes.main([str(tmp_path), '--dota', '--rawframes'])
    assert '--rawframes and --dota exclude each other' in capsys.readouterr().err


def img_split(full: str, split: str, part: str) -> None:
    """mmrotate's own tools/data/dota/split/img_split.py on one part of a generated set:
    128 x 128 windows, a gap of 32 (the demo's: DOTA's 1024 / 200 scaled down)."""
    import mmrotate
    tool = osp.join(osp.dirname(mmrotate.__file__), '.mim', 'tools', 'data', 'dota', 'split',
                    'img_split.py')
    run_tool(tool, '--img-dirs', osp.join(full, part, 'images'), '--ann-dirs',
             osp.join(full, part, 'labelTxt'), '--sizes', '128', '--gaps', '32',
             '--nproc', '1', '--save-dir', osp.join(split, part))


def test_img_split_cuts_the_generated_set_and_dota_dataset_reads_it(tmp_path):
    from mmevt.datasets import DOTA_CLASSES, generate_dota
    from mmevt.toolkits import toolkit_scope
    full, root = str(tmp_path / 'full'), str(tmp_path / 'data')
    generate_dota(full, 1, 2, (256, 256), seed=1)
    img_split(full, osp.join(root, 'split'), 'val')
    # 256 / (128 - 32): 3 x 3 windows an image, each saved with its annotation file
    patches = sorted(glob.glob(osp.join(root, 'split', 'val', 'images', '*.png')))
    assert len(patches) == 18 and osp.basename(patches[0]) == 'P0000__128__0___0.png'
    cfg = load_config(DEMO)
    with toolkit_scope('mmrotate'):
        from mmrotate.registry import DATASETS
        dataset = DATASETS.build(dict(cfg.val_dataloader.dataset, data_root=root + '/'))
        item = dataset[0]
    assert len(dataset) == 18 and dataset.metainfo['classes'] == DOTA_CLASSES
    labels = {i['bbox_label'] for k in range(18) for i in dataset.get_data_info(k)['instances']}
    assert labels <= {0, 1} and labels
    assert item['inputs'].shape == (3, 128, 128)
    boxes = item['data_samples'].gt_instances.bboxes
    assert type(boxes).__name__ == 'RotatedBoxes' and boxes.tensor.shape[-1] == 5


# ------------------------------------------------------------------ end to end
DEMO_EPOCHS = 12
# "learns": DOTA mAP@0.5 (DOTAMetric, rbox IoU 0.5) of the trained model on the held-out
# patches at least this, and the untrained model's at most UNTRAINED_MAX
TRAINED_MIN, UNTRAINED_MAX = 0.3, 0.05


@pytest.mark.e2e
def test_demo_learns_with_mmrotates_own_train_and_test_tools(tmp_path):
    from mmevt.apis import toolkit_tool_path
    from mmevt.datasets import generate_dota
    full, root = str(tmp_path / 'full'), str(tmp_path / 'data')
    generate_dota(full, 24, 8, (256, 256), seed=0)
    for part in ('train', 'val'):
        img_split(full, osp.join(root, 'split'), part)
    cfg = demo_config_on(tmp_path / 'rotated_demo.py', DEMO, root)
    work = str(tmp_path / 'work')
    log = run_tool(toolkit_tool_path('mmrotate', 'train'), cfg, '--work-dir', work)
    assert f'Epoch(train) [{DEMO_EPOCHS}]' in log, log[-3000:]
    untrained = save_untrained(cfg, tmp_path / 'untrained.pth')
    trained = last_metric(run_tool(toolkit_tool_path('mmrotate', 'test'), cfg,
                                 osp.join(work, f'epoch_{DEMO_EPOCHS}.pth'),
                                 '--work-dir', str(tmp_path / 't1')), 'dota/mAP')
    # mmevt-test (the console script) runs the same tool of the config's toolkit
    mmevt_test = osp.join(osp.dirname(sys.executable), 'mmevt-test')
    before = last_metric(run_tool(mmevt_test, cfg, untrained, '--work-dir', str(tmp_path / 't0')),
                         'dota/mAP')
    assert trained >= TRAINED_MIN and before <= UNTRAINED_MAX, (trained, before)


# ------------------------------------------------------------------ FLOPs, mmevt-swap
def test_flops_of_the_rotated_configs_are_counted_at_dotas_1024_patches():
    from mmevt.analysis import count_flops
    from mmevt.analysis.flops import build_from_config, config_complexity
    cfg = load_config(osp.join(ROTATED, EVT_T['rotated_retinanet'][0]))
    result = config_complexity(cfg)  # the default shape: mmevt.toolkits.TOOLKIT_TABLE's
    assert result['scope'] == 'mmrotate' and result['shape'] == (1024, 1024)
    assert result['input_shape'] == (1, 3, 1024, 1024)
    model, _ = build_from_config(cfg)
    assert result['flops']['backbone'] == count_flops(model.backbone, (1, 3, 1024, 1024))
    flops = result['flops']
    assert flops['backbone'] + flops['neck'] + flops['heads'] == flops['total']
    assert min(flops['neck'], flops['heads']) > 0


# mmrotate's own configs, by what decides their ground truth's box type
ZOO_TARGETS = {
    # LoadAnnotations(box_type='qbox'), then ConvertBoxType to rbox (DOTA's labelTxt)
    'rotated_retinanet/rotated-retinanet-rbox-le90_r50_fpn_1x_dota.py': 'rbox',
    # LoadAnnotations(box_type='qbox') alone
    'gliding_vertex/gliding-vertex-qbox_r50_fpn_1x_dota.py': 'qbox',
    # weak supervision: to horizontal boxes, then back to rbox (angle 0)
    'h2rbox_v2/h2rbox_v2-le90_r50_fpn-1x_dota.py': 'rbox',
    # COCO-format SAR ships: polygon masks, ConvertMask2BoxType to rbox (the masks dropped)
    'oriented_rcnn/oriented-rcnn-le90_r50_fpn_6x_hrsid.py': 'rbox',
    # a ConcatDataset of two DIOR datasets, each with its pipeline
    'rotated_retinanet/rotated-retinanet-rbox-le90_r50_fpn_1x_dior.py': 'rbox',
}
LOAD = dict(type='mmdet.LoadAnnotations', with_bbox=True)
POLYGONS = dict(LOAD, with_mask=True, poly2mask=False)
TO_RBOX = dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox'))


def _cfg(*pipelines, wrapper=None):
    """A config whose train dataloader reads ``pipelines`` (one dataset each: several in a
    ``ConcatDataset``), in ``wrapper`` (a dataset wrapper's type, with its own settings)."""
    from mmengine.config import Config
    datasets = [dict(type='DOTADataset', pipeline=list(p)) for p in pipelines]
    dataset = datasets[0] if len(datasets) == 1 else dict(type='ConcatDataset',
                                                          datasets=datasets)
    if wrapper:
        dataset = dict(wrapper, dataset=dataset)
    return Config(dict(train_dataloader=dict(dataset=dataset)))


def test_the_smoke_batch_follows_every_transform_deciding_the_ground_truth():
    from mmevt.swap import load_src
    from mmevt.toolkits.mmrotate import TrainingTargets, training_targets
    for src, box in ZOO_TARGETS.items():
        assert training_targets(load_src(f'mmrotate::{src}')) == TrainingTargets(box), src
    cases = [
        ([LOAD], TrainingTargets('hbox')),  # mmdet's default, read from the class
        ([POLYGONS, dict(type='ConvertMask2BoxType', box_type='qbox')],
         TrainingTargets('qbox')),
        ([POLYGONS, dict(type='ConvertMask2BoxType', box_type='rbox', keep_mask=True)],
         TrainingTargets('rbox', 'polygon')),
        ([dict(POLYGONS, poly2mask=True), TO_RBOX], TrainingTargets('rbox', 'bitmap')),
        # ConvertBoxType of other keys only: the boxes stay
        ([dict(LOAD, box_type='qbox'),
          dict(type='ConvertBoxType', box_type_mapping=dict(gt_ignore_bboxes='rbox'))],
         TrainingTargets('qbox')),
        # masks only (with_bbox=False), the boxes from them
        ([dict(POLYGONS, with_bbox=False, box_type='qbox'),
          dict(type='ConvertMask2BoxType', box_type='hbox')], TrainingTargets('hbox')),
    ]
    for pipeline, targets in cases:
        assert training_targets(_cfg(pipeline)) == targets, pipeline
    # through wrappers: RepeatDataset's inner pipeline; MultiImageMixDataset's own after it
    assert training_targets(_cfg([LOAD], wrapper=dict(type='RepeatDataset', times=2))) == \
        TrainingTargets('hbox')
    mix = dict(type='mmdet.MultiImageMixDataset', pipeline=[TO_RBOX])
    assert training_targets(_cfg([LOAD], wrapper=mix)) == TrainingTargets('rbox')
    from_masks = [POLYGONS, dict(type='ConvertMask2BoxType', box_type='rbox')]
    assert training_targets(_cfg([LOAD, TO_RBOX], from_masks)) == TrainingTargets('rbox')


# mmrotate's own configs that do not load, whatever reads them, and why
UNLOADABLE = {
    # imports mmcls (mmpretrain's predecessor), which neither stack installs
    'convnext/rotated-retinanet-rbox-le90_convnext-tiny_fpn_kld-stable_adamw-1x_dota.py':
        "Failed to import custom modules from {'imports': ['mmcls.models']",
    # inherits rotated-retinanet-obb-le135_r50_fpn_1x_dota.py, a file mmrotate's package lacks
    'gwd/rotated-retinanet-rbox-le135_r50_fpn_gwd_1x_dota.py':
        'rotated-retinanet-obb-le135_r50_fpn_1x_dota.py',
}


def test_the_ground_truth_of_every_mmrotate_config_is_read():
    import mmrotate

    from mmevt.toolkits.mmrotate import BOX_TYPES, training_targets
    root = osp.join(osp.dirname(mmrotate.__file__), '.mim', 'configs')
    found, unloadable = {}, {}
    for path in sorted(glob.glob(osp.join(root, '**', '*.py'), recursive=True)):
        name = osp.relpath(path, root)
        if '_base_' in name.split(osp.sep):  # datasets, schedules: no model
            continue
        try:
            cfg = load_config(path)
        except (ImportError, FileNotFoundError) as e:
            unloadable[name] = str(e)
            continue
        found[name] = training_targets(cfg)
    assert sorted(unloadable) == sorted(UNLOADABLE)
    for name, why in UNLOADABLE.items():
        assert why in unloadable[name], unloadable[name]
    assert len(found) > 90 and {t.box_type for t in found.values()} <= set(BOX_TYPES)
    assert found['oriented_rcnn/oriented-rcnn-le90_r50_fpn_6x_ssdd.py'].box_type == 'rbox'


class OddBoxes:
    """A user's transform that decides the box type by a setting the smoke test does not
    know (a class as ``type``: mmengine builds it as it is)."""

    def __init__(self, target_box_type: str = 'rbox') -> None:
        self.target_box_type = target_box_type


@pytest.mark.parametrize('pipelines, error', [
    ([[LOAD, dict(type='NoSuchTransform')]], r"transform 'NoSuchTransform' is not in "
                                             r"mmrotate's TRANSFORMS registry"),
    ([[POLYGONS, dict(type='ConvertMask2BoxType', box_type='obb')]],
     r"ConvertMask2BoxType gives boxes of type 'obb'; the smoke test makes "
     r"\['rbox', 'qbox', 'hbox'\]"),
    ([[dict(LOAD, box_type=None)]], r"LoadAnnotations gives boxes of type None"),
    ([[LOAD, dict(type=OddBoxes)]],
     r"OddBoxes decides the box type by \['target_box_type'\], which the smoke test cannot "
     r"read"),
    ([[LOAD, dict(type='mmdet.RandomChoice', transforms=[[TO_RBOX], []])]],
     r"RandomChoice changes the ground truth inside its transforms \(boxes 'hbox' -> 'rbox'"),
    ([[dict(type='mmdet.LoadImageFromFile')]], r'gives no boxes: none of its transforms'),
    ([], r'has no training pipeline'),
    ([[LOAD], [LOAD, TO_RBOX]], r'pipelines end with different ground truth'),
], ids=['unregistered', 'unknown-type', 'no-type', 'unknown-setting', 'random', 'no-boxes',
        'no-pipeline', 'datasets-disagree'])
def test_ground_truth_the_smoke_test_cannot_read_is_an_error_naming_the_transform(
        pipelines, error):
    from mmevt.toolkits.mmrotate import training_targets
    with pytest.raises(ValueError, match=error):
        training_targets(_cfg(*pipelines))


def test_the_check_refuses_a_pipeline_it_cannot_read_naming_the_config(tmp_path):
    from mmevt.swap import smoke_test_config
    base = osp.join(ROTATED, EVT_T['oriented_rcnn'][0])
    dst = write_config(tmp_path / 'odd.py', f"""_base_ = {base!r}
train_dataloader = dict(dataset=dict(pipeline=[
    dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
    dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='xyxy'))]))
""")
    with pytest.raises(ValueError, match=rf"{re.escape(dst)}: the training pipeline's "
                                         r"ConvertBoxType gives boxes of type 'xyxy'"):
        smoke_test_config(dst, log=lambda _: None)


def test_the_smoke_batch_has_boxes_and_masks_of_the_pipelines_kind():
    from mmdet.structures.mask import BitmapMasks, PolygonMasks

    from mmevt.toolkits.mmrotate import rotated_batch
    for box, kind, width in (('rbox', 'RotatedBoxes', 5), ('qbox', 'QuadriBoxes', 8),
                             ('hbox', 'HorizontalBoxes', 4)):
        batch = rotated_batch(64, 2, 2, box)
        gt = batch['data_samples'][0].gt_instances
        assert type(gt.bboxes).__name__ == kind and gt.bboxes.tensor.shape == (3, width)
        assert 'masks' not in gt and batch['inputs'][0].shape == (3, 64, 64)
    rboxes = rotated_batch(64, 2, 2)['data_samples'][1].gt_instances.bboxes
    polygons = rotated_batch(64, 2, 2, 'qbox', 'polygon')['data_samples'][1].gt_instances
    assert isinstance(polygons.masks, PolygonMasks) and len(polygons.masks) == 3
    # each object's polygon: its box's corners
    corners = torch.from_numpy(np.stack([m[0] for m in polygons.masks.masks])).float()
    assert torch.allclose(corners, polygons.bboxes.tensor, atol=1e-4)
    bitmaps = rotated_batch(64, 2, 2, 'rbox', 'bitmap')['data_samples'][1].gt_instances.masks
    assert isinstance(bitmaps, BitmapMasks) and bitmaps.masks.shape == (3, 64, 64)
    areas = torch.tensor(bitmaps.areas, dtype=torch.float32)
    assert torch.allclose(areas, rboxes.areas, rtol=0.25), (areas, rboxes.areas)
    with pytest.raises(ValueError, match=r"masks one of \['polygon', 'bitmap'\] or None; got "
                                         r"'rbox' and 'poly'"):
        rotated_batch(64, 1, 1, 'rbox', 'poly')


# Configs of users of mmrotate that the zoo has none of (the zoo's own rbox / qbox configs,
# boxes from masks among them, are in tests/fixtures/swap_zoo.yml). Horizontal boxes: mmdet's
# RetinaNet on DOTA in mmrotate's scope (a horizontal baseline, its head mmdet's).
HORIZONTAL_SRC = """_base_ = \
    'mmrotate::rotated_retinanet/rotated-retinanet-rbox-le90_r50_fpn_1x_dota.py'
train_dataloader = dict(dataset=dict(pipeline=[
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
    dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='hbox')),
    dict(type='mmdet.Resize', scale=(1024, 1024), keep_ratio=True),
    dict(type='mmdet.PackDetInputs')]))
model = dict(
    bbox_head=dict(
        _delete_=True, type='mmdet.RetinaHead', num_classes=15, in_channels=256,
        feat_channels=256,
        anchor_generator=dict(type='mmdet.AnchorGenerator', octave_base_scale=4,
                              scales_per_octave=3, ratios=[0.5, 1.0, 2.0],
                              strides=[8, 16, 32, 64, 128]),
        bbox_coder=dict(type='mmdet.DeltaXYWHBBoxCoder', target_means=[0.] * 4,
                        target_stds=[1.] * 4),
        loss_cls=dict(type='mmdet.FocalLoss', use_sigmoid=True, gamma=2.0, alpha=0.25,
                      loss_weight=1.0),
        loss_bbox=dict(type='mmdet.L1Loss', loss_weight=1.0)),
    train_cfg=dict(assigner=dict(iou_calculator=dict(type='mmdet.BboxOverlaps2D'))),
    test_cfg=dict(nms=dict(type='nms', iou_threshold=0.5)))
"""
# The SAR ship pipeline keeping the polygon masks its rotated boxes are made from.
KEPT_MASKS_SRC = """_base_ = 'mmrotate::oriented_rcnn/oriented-rcnn-le90_r50_fpn_6x_hrsid.py'
train_dataloader = dict(dataset=dict(pipeline=[
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.LoadAnnotations', with_bbox=True, with_mask=True, poly2mask=False),
    dict(type='ConvertMask2BoxType', box_type='rbox', keep_mask=True),
    dict(type='mmdet.Resize', scale=(800, 800), keep_ratio=True),
    dict(type='mmdet.PackDetInputs')]))
"""


@pytest.mark.e2e
@pytest.mark.parametrize('src, boxes, masks', [
    (HORIZONTAL_SRC, 'HorizontalBoxes', None),
    (KEPT_MASKS_SRC, 'RotatedBoxes', 'PolygonMasks'),
], ids=['hbox', 'kept-polygon-masks'])
def test_the_check_trains_on_the_ground_truth_the_pipeline_gives(src, boxes, masks, tmp_path,
                                                                  monkeypatch):
    # a user's config, swapped and smoke-tested as `mmevt-swap SRC --check` does; the batch
    # the check trained on is the one rotated_batch made
    import mmevt.toolkits.mmrotate as mmrotate
    from mmevt.swap import smoke_test_config, swap_config
    made = []

    def recorded(*args):
        made.append(rotated_batch(*args))
        return made[-1]
    rotated_batch = mmrotate.rotated_batch
    monkeypatch.setattr(mmrotate, 'rotated_batch', recorded)
    src_path = write_config(tmp_path / 'src.py', src)
    dst = str(tmp_path / 'dst.py')
    plan, _, _ = swap_config(src_path, 'evt-test', dst, log=lambda _: None)
    result = smoke_test_config(dst, stages=plan.stages, flops=False, log=lambda _: None)
    assert result.backbone_grad_norm > 0 and result.num_predictions == 2
    gt = made[0]['data_samples'][0].gt_instances
    assert type(gt.bboxes).__name__ == boxes
    assert type(gt.get('masks')).__name__ == (masks or 'NoneType')


def test_the_models_needing_a_gpu_are_found_by_their_modules():
    from mmevt.swap import load_src
    from mmevt.toolkits.mmrotate import gpu_only_ops
    assert gpu_only_ops(load_config(osp.join(ROTATED, EVT_T['roi_trans'][0])).model) == {}
    assert gpu_only_ops(load_src('mmrotate::redet/redet-le90_re50_refpn_1x_dota.py').model) \
        == {'RiRoIAlignRotated': ('riroi_align_rotated', )}
    found = gpu_only_ops(load_src('mmrotate::cfa/cfa-qbox_r50_fpn_1x_dota.py').model)
    assert 'convex_iou' in {op for ops in found.values() for op in ops}, found
