"""``mmevt-swap`` (``tools/misc/swap_backbone.py``): EVT swapped into the toolkits' configs.

The zoo test runs every entry of ``tests/fixtures/swap_zoo.yml`` in-process: swap with
``evt-test``, then :func:`mmevt.swap.smoke_test_config` (one training step with a finite loss
and non-zero backbone gradients, one prediction) on a generated batch; for mmrotate's models
with CUDA-only mmcv ops (``needs_gpu``) the swap is written and the smoke test refused, and
for the others the smoke batch's boxes are of the entry's ``box_type`` (whatever transform of
the training pipeline decides it: rotated boxes from polygon masks in the SAR ship configs).
mmaction2's swaps, refusals and counts are tested in ``tests/test_action.py`` too, mmrotate's
in ``tests/test_rotated.py``.
"""
import importlib.util
import os.path as osp
import re

import pytest
import yaml
from helpers import (REPO, UPSTREAM_ONLY_TOOLKITS, current_stack, load_config, run_tool,
                     toolkit_tool_env, write_config)

from mmevt.models.backbones import arch_zoo
from mmevt.swap import (BackboneOutputs, check_config, concatenated_outputs, family_config,
                        map_outputs, remap_channels, remap_featuremap_size, smoke_test_config,
                        swap_config)

with open(osp.join(REPO, 'tests', 'fixtures', 'swap_zoo.yml')) as f:
    ZOO = yaml.safe_load(f)['configs']
TINY = [16, 32, 64, 128]  # evt-test's embed_dims


def _quiet(_msg):
    pass


def _refused_on_the_fork(src, tmp_path) -> bool:
    """True where SRC's toolkit is not installed: only mmpose and mmaction2 on the fork,
    checked here, where the swap must refuse SRC naming it."""
    toolkit = src.split('::')[0]
    if importlib.util.find_spec(toolkit) is not None:
        return False
    assert toolkit in UPSTREAM_ONLY_TOOLKITS and current_stack() == 'fork', \
        f'{toolkit} is not installed'
    with pytest.raises(ValueError, match=rf"SRC '{toolkit}::.*"
                                         rf"{UPSTREAM_ONLY_TOOLKITS[toolkit]} is not installed"):
        _swap(src, tmp_path)
    return True


def _swap(src, tmp_path, arch='evt-test', **kwargs):
    dst = str(tmp_path / 'dst.py')
    plan, cfg, _ = swap_config(src, arch, dst, log=_quiet, **kwargs)
    with open(dst) as f:
        return dst, plan, f.read()


@pytest.mark.e2e
@pytest.mark.parametrize('entry', ZOO, ids=[e['src'].split('/')[-1][:-3] for e in ZOO])
def test_zoo_config_swaps_trains_and_predicts(entry, tmp_path):
    if _refused_on_the_fork(entry['src'], tmp_path):
        return
    if entry.get('unsupported'):
        with pytest.raises(ValueError, match=entry['error']):
            _swap(entry['src'], tmp_path)
        return
    dst, plan, text = _swap(entry['src'], tmp_path)
    assert list(plan.stages) == entry['stages'], plan.outputs.describe()
    if entry.get('needs_gpu'):  # mmrotate's models with CUDA-only mmcv ops
        assert any(entry['needs_gpu'] in n for n in plan.notes), plan.notes
        with pytest.raises(ValueError, match=r'the smoke test runs on the CPU, and this model '
                           rf"needs a GPU: .*{entry['needs_gpu']}"):
            smoke_test_config(dst, stages=plan.stages, flops=False, log=_quiet)
        return
    result = smoke_test_config(dst, stages=plan.stages, flops=False, log=_quiet)
    assert result.backbone_grad_norm > 0 and result.num_predictions == 2
    cfg = load_config(dst)
    if 'box_type' in entry:  # mmrotate: the smoke batch's boxes, as the pipeline ends
        from mmevt.toolkits.mmrotate import training_box_type
        assert training_box_type(cfg) == entry['box_type']
    # mmaction2's Recognizer2D unpacks the maps of 'mmpretrain.' backbones only
    kind = 'mmpretrain.EVT' if entry['src'].startswith('mmaction::') else 'EVT'
    assert cfg.model.backbone.type == kind and cfg.model.backbone.arch == 'evt-test'


def test_dilated_outputs_go_to_the_next_stages_with_a_note():
    outs = BackboneOutputs('ResNetV1c', [256, 512, 1024, 2048], [4, 8, 8, 8])
    stages, notes = map_outputs(outs)
    assert stages == [0, 1, 2, 3]
    assert any('dilated' in n for n in notes)
    assert map_outputs(BackboneOutputs('CSPNeXt', [96, 192, 384], [8, 16, 32]))[0] == [1, 2, 3]
    assert map_outputs(BackboneOutputs('VisionTransformer', [768], [None]))[0] == [3]


def test_a_stride_evt_does_not_have_is_an_error():
    with pytest.raises(ValueError, match='output 1 has stride 64'):
        map_outputs(BackboneOutputs('X', [64, 128], [32, 64]))
    with pytest.raises(ValueError, match='stride 2'):
        map_outputs(BackboneOutputs('X', [64], [2]))


def test_remap_reads_in_index_and_refuses_channels_the_backbone_does_not_have():
    outs = BackboneOutputs('ResNet', [256, 512, 1024, 2048], [4, 8, 16, 32])
    stages = [0, 1, 2, 3]
    head = dict(type='FCNHead', in_channels=1024, in_index=2)
    assert remap_channels(head, 'model.auxiliary_head', outs, stages, TINY) == \
        dict(in_channels=64)
    aspp = dict(type='DepthwiseSeparableASPPHead', in_channels=2048, in_index=3,
                c1_in_channels=256)
    assert remap_channels(aspp, 'h', outs, stages, TINY) == \
        dict(in_channels=128, c1_in_channels=16)
    with pytest.raises(ValueError, match=r'model.neck \(FPN\).*does not match'):
        remap_channels(dict(type='FPN', in_channels=[256, 512, 1024, 1024]), 'model.neck',
                       outs, stages, TINY)
    with pytest.raises(ValueError, match='no in_channels'):
        remap_channels(dict(type='Odd', channels=3), 'model.neck', outs, stages, TINY)


def test_a_concatenating_neck_gives_the_head_the_sum_of_the_channels():
    outs = BackboneOutputs('HRNet', [32, 64, 128, 256], [4, 8, 16, 32])
    stages = [0, 1, 2, 3]
    neck = dict(type='FeatureMapProcessor', concat=True)
    assert concatenated_outputs(neck, 4) == [0, 1, 2, 3]
    assert concatenated_outputs(dict(neck, select_index=(0, -1)), 4) == [0, 3]
    assert concatenated_outputs(dict(type='FeatureMapProcessor', select_index=1), 4) is None
    head = dict(type='CIDHead', in_channels=480)
    assert remap_channels(head, 'model.head', outs, stages, TINY, concat=[0, 1, 2, 3]) == \
        dict(in_channels=16 + 32 + 64 + 128)
    with pytest.raises(ValueError, match='not the sum of the concatenated backbone outputs'):
        remap_channels(dict(head, in_channels=256), 'model.head', outs, stages, TINY,
                       concat=[0, 1, 2, 3])


def test_a_flattening_pose_head_gets_evts_map_size():
    simcc = dict(type='SimCCHead', in_channels=2048, input_size=(192, 256),
                 in_featuremap_size=(6, 8))
    resnet = BackboneOutputs('ResNet', [2048], [32])
    assert remap_featuremap_size(simcc, 'model.head', resnet, [3]) == {}  # same stride
    vit = BackboneOutputs('VisionTransformer', [768], [16])
    assert remap_featuremap_size(dict(simcc, in_featuremap_size=(12, 16)), 'model.head', vit,
                                 [2]) == {}
    # EVT rounds up: 200 x 150 crops give a 7 x 5 map at stride 32 (a floor would say 6 x 4)
    odd = dict(simcc, input_size=(150, 200), in_featuremap_size=(4, 6))
    assert remap_featuremap_size(odd, 'model.head', resnet, [3]) == \
        dict(in_featuremap_size=(5, 7))
    with pytest.raises(ValueError, match='no input_size'):
        remap_featuremap_size(dict(type='X', in_featuremap_size=(6, 8)), 'model.head',
                              resnet, [3])


def test_a_top_down_pose_config_gets_our_pose_recipe(tmp_path):
    src = 'mmpose::body_2d_keypoint/topdown_heatmap/coco/td-hm_res50_8xb64-210e_coco-256x192.py'
    if _refused_on_the_fork(src, tmp_path):
        return
    dst, plan, text = _swap(src, tmp_path, arch='evt-s')
    ours = load_config(osp.join(REPO, 'configs/pose/topdown_heatmap/'
                                'td-hm_evt-s_8xb32-210e_coco-256x192.py'))
    cfg = load_config(dst)
    assert plan.stages == [3] and cfg.model.head.in_channels == 512
    assert cfg.optim_wrapper.optimizer == ours.optim_wrapper.optimizer  # Adam 5e-4
    assert cfg.model.backbone.drop_path_rate == ours.model.backbone.drop_path_rate == 0.15
    assert cfg.auto_scale_lr.base_batch_size == 256
    assert 'param_scheduler' not in text  # SRC's schedule kept
    assert 'Adam and lr of our td-hm_evt-s_8xb32-210e_coco-256x192.py' in text


def test_only_the_neck_is_remapped_not_the_heads_that_read_it(tmp_path):
    # FPN's 256 output channels equal ResNet's first width: the RPN / RoI heads (256) read
    # the FPN and must keep 256.
    dst, plan, text = _swap('mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py', tmp_path,
                            arch='evt-s')
    cfg = load_config(dst)
    assert cfg.model.neck.in_channels == arch_zoo['evt-s']['embed_dims']
    assert cfg.model.rpn_head.in_channels == 256
    assert cfg.model.roi_head.bbox_head.in_channels == 256
    assert 'rpn_head' not in text and 'roi_head' not in text
    assert text.count("_base_ = 'mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py'") == 1
    assert "custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)" in text
    # a comment says why before every override of model and every top-level override
    lines = text.splitlines()
    start = lines.index('model = dict(')
    end = lines.index(')', start)
    overrides = [i for i, line in enumerate(lines)
                 if (start < i < end and re.match(r'^    [a-z_]+=', line))
                 or (re.match(r'^[a-z_]+ = ', line) and not line.startswith('model = '))]
    assert len(overrides) >= 5  # custom_imports, backbone, neck, optim_wrapper, auto_scale_lr
    for i in overrides:
        assert lines[i - 1].lstrip().startswith('#'), lines[i]


def test_recipe_evt_is_our_family_config_and_keep_is_the_source(tmp_path):
    src = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'
    dst, _, _ = _swap(src, tmp_path, arch='evt-s')
    ours = load_config(osp.join(REPO, 'configs/det/mask_rcnn/mask-rcnn_evt-s_fpn_1x_coco.py'))
    cfg = load_config(dst)
    assert cfg.optim_wrapper.optimizer == ours.optim_wrapper.optimizer
    assert cfg.optim_wrapper.paramwise_cfg == ours.optim_wrapper.paramwise_cfg
    assert cfg.model.backbone.drop_path_rate == ours.model.backbone.drop_path_rate
    assert cfg.model.backbone.norm_cfg == ours.model.backbone.norm_cfg
    keep = str(tmp_path / 'keep.py')
    swap_config(src, 'evt-s', keep, recipe='keep', log=_quiet)
    assert load_config(keep).optim_wrapper.optimizer.type == 'SGD'
    # mmseg: our AdamW schedule, ending where SRC's schedule ends
    dst, _, _ = _swap('mmseg::pspnet/pspnet_r50-d8_4xb4-80k_ade20k-512x512.py',
                      tmp_path / 'seg', arch='evt-t')
    seg = load_config(dst)
    assert seg.optim_wrapper.optimizer.type == 'AdamW'
    assert seg.param_scheduler[-1].end == 80000 and seg.model.pretrained is None
    # an alias (any case) is the arch: our config of its canonical name, named in the file
    assert family_config('mask_rcnn', 'EVT-Small') == family_config('mask_rcnn', 'evt-s')
    assert family_config('mask_rcnn', 'evt-s')[0].endswith('mask-rcnn_evt-s_fpn_1x_coco.py')


def test_pretrained_backbone_loads_in_the_swapped_model(tmp_path):
    import torch
    from mmengine.registry import DefaultScope, MODELS

    from mmevt import EVT
    ckpt = str(tmp_path / 'evt-test_in1k.pth')
    torch.manual_seed(1)
    torch.save({'state_dict': {f'backbone.{k}': v
                               for k, v in EVT('evt-test').state_dict().items()}}, ckpt)
    dst, _, _ = _swap('mmdet::retinanet/retinanet_r50_fpn_1x_coco.py', tmp_path,
                      pretrained=ckpt, recipe='keep')
    cfg = load_config(dst)
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(cfg.model)
    model.backbone.init_weights()
    saved = torch.load(ckpt)['state_dict']
    for k, v in model.backbone.state_dict().items():
        assert torch.equal(v, saved[f'backbone.{k}']), k


def test_a_user_config_file_is_inherited_from_the_written_configs_folder(tmp_path):
    (tmp_path / 'mine').mkdir()
    src = write_config(tmp_path / 'mine' / 'retina.py',
                       "_base_ = 'mmdet::retinanet/retinanet_r50_fpn_1x_coco.py'\n"
                       'model = dict(bbox_head=dict(num_classes=3))\n')
    dst = str(tmp_path / 'out' / 'retina_evt.py')
    swap_config(src, 'evt-t', dst, log=_quiet)
    cfg = load_config(dst)
    assert cfg.model.bbox_head.num_classes == 3
    assert cfg.model.neck.in_channels == arch_zoo['evt-t']['embed_dims']
    with open(dst) as f:
        assert "_base_ = '../mine/retina.py'" in f.read()


def test_user_errors_name_the_bad_value(tmp_path):
    dst = str(tmp_path / 'x.py')
    with pytest.raises(ValueError, match="--arch must be one of .*got 'evt-xxl'"):
        swap_config('mmdet::retinanet/retinanet_r50_fpn_1x_coco.py', 'evt-xxl', dst,
                    log=_quiet)
    with pytest.raises(FileNotFoundError, match='nope.py'):
        swap_config(str(tmp_path / 'nope.py'), 'evt-t', dst, log=_quiet)
    write_config(dst, '# mine\n')
    with pytest.raises(FileExistsError, match='--overwrite'):
        swap_config('mmdet::retinanet/retinanet_r50_fpn_1x_coco.py', 'evt-t', dst,
                    log=_quiet)
    with open(dst) as f:
        assert f.read() == '# mine\n'
    # the smoke test's deprecated name still runs it (here: to the missing config's error)
    with pytest.warns(FutureWarning, match='smoke_test_config'), \
            pytest.raises(FileNotFoundError, match='nope.py'):
        check_config(str(tmp_path / 'nope.py'), log=_quiet)


@pytest.mark.e2e
def test_cli_check_then_the_toolkits_own_train_tool(shapes_root, tmp_path):
    from det_tiny import tiny_det_config

    from mmevt.apis import toolkit_tool_path
    dst = str(tmp_path / 'mask-rcnn_evt-test_fpn_1x_coco.py')
    out = run_tool('tools/misc/swap_backbone.py',
                   'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py', '--arch', 'evt-test',
                   '--out', dst, '--check')
    assert re.search(r'params \(whole model\): [\d.]+ M -> [\d.]+ M', out), out
    assert re.search(r'backbone FLOPs at 64 x 64: [\d.]+ M -> [\d.]+ M', out), out
    assert 'check: 64 x 64 batch of 2' in out
    # the toolkit's own tools/train.py reads DST (custom_imports) and trains 2 iterations
    work = str(tmp_path / 'work')
    cfg = write_config(tmp_path / 'tiny.py', tiny_det_config(dst, shapes_root, work))
    out = run_tool(toolkit_tool_path('mmdet', 'train'), cfg, env=toolkit_tool_env())
    assert 'Epoch(train) [1][2/2]' in out, out[-3000:]
    assert osp.isfile(osp.join(work, 'epoch_1.pth'))


POSE_TRAIN = '''_base_ = {dst!r}
data_root = {root!r}
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=data_root, ann_file='annotations/person_keypoints_training.json',
                 data_prefix=dict(img='images/training/')))
train_cfg = dict(max_epochs=1, val_interval=1)
val_cfg = val_dataloader = val_evaluator = None
test_cfg = test_dataloader = test_evaluator = None
param_scheduler = []
model = dict(backbone=dict(norm_cfg=dict(type='BN')))  # one process: no SyncBN
default_hooks = dict(logger=dict(interval=1),
                     checkpoint=dict(interval=1, save_best=None))
custom_hooks = []
work_dir = {work!r}
'''


@pytest.mark.e2e
def test_a_swapped_pose_config_trains_with_mmposes_own_train_tool(tmp_path):
    src = 'mmpose::body_2d_keypoint/topdown_heatmap/coco/td-hm_res50_8xb64-210e_coco-256x192.py'
    if _refused_on_the_fork(src, tmp_path):
        return
    from mmevt.apis import toolkit_tool_path
    from mmevt.datasets import generate_keypoints
    dst = str(tmp_path / 'td-hm_evt-test_coco-256x192.py')
    run_tool('tools/misc/swap_backbone.py', src, '--arch', 'evt-test', '--out', dst)
    root = str(tmp_path / 'data')
    generate_keypoints(root, num_train=4, num_val=2, seed=0)
    work = str(tmp_path / 'work')
    cfg = write_config(tmp_path / 'train.py',
                       POSE_TRAIN.format(dst=dst, root=root + '/', work=work))
    # mmpose's own tools/train.py reads DST (custom_imports import mmevt) and trains
    out = run_tool(toolkit_tool_path('mmpose', 'train'), cfg, env=toolkit_tool_env())
    assert 'Epoch(train) [1][2/2]' in out, out[-3000:]
    assert osp.isfile(osp.join(work, 'epoch_1.pth'))
