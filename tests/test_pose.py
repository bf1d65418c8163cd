"""mmpose: the top-down heatmap configs, EVT at pose input sizes, the generated keypoint data
and the pose demo end to end with mmpose's own tools/train.py and tools/test.py."""
import json
import os.path as osp
import re

import pytest
import torch

from helpers import (CONFIGS, last_metric, load_config, load_tool, refused_where_missing,
                     run_tool, save_untrained, unscoped, write_config)

POSE = osp.join(CONFIGS, 'pose', 'topdown_heatmap')
EVT_T = osp.join(POSE, 'td-hm_evt-t_8xb32-210e_coco-256x192.py')
EVT_S = osp.join(POSE, 'td-hm_evt-s_8xb32-210e_coco-256x192.py')
SWIN_T = ('mmpose::body_2d_keypoint/topdown_heatmap/coco/'
          'td-hm_swin-t-p4-w7_8xb32-210e_coco-256x192.py')
DEMO = osp.join(CONFIGS, 'demo', 'td-hm_evt-test_figures-128x96.py')


def _without_model(cfg) -> dict:
    out = unscoped(cfg.to_dict())
    out.pop('model')
    out.pop('custom_imports', None)
    out.pop('pretrained', None)  # ours: the backbone checkpoint's name
    return out


def test_configs_are_mmposes_swin_t_recipe_with_the_backbone_swapped():
    if refused_where_missing('mmpose', EVT_T):
        return
    from mmevt.swap import load_src
    ours, swin = load_config(EVT_T), load_src(SWIN_T)
    assert _without_model(ours) == _without_model(swin)  # schedule, data, codec, hooks
    model, theirs = unscoped(ours.model.to_dict()), unscoped(swin.model.to_dict())
    assert model.pop('backbone') == dict(
        type='EVT', arch='evt-t', drop_path_rate=0.1, out_indices=(3, ),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/evt-t_in1k.pth',
                      prefix='backbone.'))
    theirs.pop('backbone')
    assert model['head'].pop('in_channels') == 512 and theirs['head'].pop('in_channels') == 768
    assert model == theirs
    small = load_config(EVT_S)
    assert _without_model(small) == _without_model(ours)
    assert small.model.backbone.arch == 'evt-s' and small.model.backbone.drop_path_rate == 0.15
    assert small.model.backbone.init_cfg.checkpoint == 'checkpoints/evt-s_in1k.pth'
    assert small.model.head == ours.model.head


@pytest.mark.parametrize('size,expected', [((256, 192), (8, 6)), ((128, 96), (4, 3)),
                                           ((200, 150), (7, 5))])
def test_backbone_contract_at_pose_input_sizes(size, expected):
    # non-square crops; sides not a multiple of 32 round up (200 x 150 -> 7 x 5)
    from mmevt.models import EVT
    torch.manual_seed(0)
    model = EVT('evt-t', out_indices=(3, )).eval()
    with torch.no_grad():
        outs = model(torch.randn(2, 3, *size))
    assert len(outs) == 1 and outs[0].shape == (2, 512, *expected)


def test_a_loss_step_reaches_every_backbone_parameter():
    if refused_where_missing('mmpose', EVT_T):
        return
    from mmevt.toolkits.mmpose import pose_batches
    from mmevt.toolkits import build_model, toolkit_scope
    cfg = load_config(EVT_T)
    # without stochastic depth, which drops whole blocks of a batch of 2 at random
    cfg.model.backbone.drop_path_rate = 0.
    model = build_model(cfg, seed=0, revert_sync_bn=True).train()
    batch, _ = pose_batches(cfg, 64)  # the config's own pipeline: 256 x 192 crops, heatmaps
    with toolkit_scope('mmpose'):
        data = model.data_preprocessor(batch, True)
        assert data['inputs'].shape == (2, 3, 256, 192)
        loss, _ = model.parse_losses(model(**data, mode='loss'))
    loss.backward()
    params = [(n, p) for n, p in model.backbone.named_parameters() if p.requires_grad]
    without = [n for n, p in params if p.grad is None or not p.grad.abs().sum() > 0]
    assert params and not without, without


# ------------------------------------------------------------------ generated keypoints
def test_keypoint_generator_is_deterministic_and_never_overwrites(tmp_path):
    from mmevt.datasets import generate_keypoints
    a, b = tmp_path / 'a', tmp_path / 'b'
    generate_keypoints(str(a), 3, 2, (64, 96), seed=5)
    paths = generate_keypoints(str(b), 3, 2, (64, 96), seed=5)
    for rel in ('annotations/person_keypoints_training.json', 'images/validation/000001.jpg'):
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    generate_keypoints(str(a), 3, 2, (64, 96), seed=5)  # same settings: reused
    with pytest.raises(FileExistsError, match='holds a keypoints dataset made with'):
        generate_keypoints(str(a), 4, 2, (64, 96), seed=5)
    with pytest.raises(ValueError, match=r'img_size must be at least 32 x 32'):
        generate_keypoints(str(tmp_path / 'c'), 1, 1, (16, 64))
    with open(paths['keypoints_training']) as f:
        coco = json.load(f)
    assert len(coco['categories'][0]['keypoints']) == 17
    for ann in coco['annotations']:
        x, y, w, h = ann['bbox']
        kps = torch.tensor(ann['keypoints']).view(17, 3)
        assert ann['num_keypoints'] == 17 and (kps[:, 2] == 2).all() and ann['iscrowd'] == 0
        assert (kps[:, 0] >= x).all() and (kps[:, 0] <= x + w).all()
        assert (kps[:, 1] >= y).all() and (kps[:, 1] <= y + h).all()
        assert ann['area'] == pytest.approx(w * h, abs=0.1)
        # the body's left side is on the image's right (a figure seen from the front)
        assert (kps[5::2, 0] > kps[6::2, 0]).all()


def test_generator_command_line_writes_keypoints(tmp_path, capsys):
    make_shapes = load_tool('tools/misc/make_shapes.py')
    make_shapes.main([str(tmp_path), '--keypoints', '--num-train', '2', '--num-val', '1',
                      '--size', '64', '48'])
    assert 'keypoints_training:' in capsys.readouterr().out
    assert (tmp_path / 'annotations' / 'person_keypoints_validation.json').is_file()
    with pytest.raises(SystemExit):
        make_shapes.main([str(tmp_path), '--keypoints', '--classification'])
    assert '--classification and --keypoints exclude each other' in capsys.readouterr().err


def test_generated_keypoints_load_in_mmposes_coco_dataset(tmp_path):
    if refused_where_missing('mmpose', EVT_T):
        return
    from mmevt.datasets import generate_keypoints
    from mmevt.toolkits import toolkit_scope
    generate_keypoints(str(tmp_path), 2, 3, (128, 128), seed=1)
    cfg = load_config(DEMO)
    with toolkit_scope('mmpose'):
        from mmpose.registry import DATASETS
        dataset = DATASETS.build(dict(cfg.val_dataloader.dataset, data_root=str(tmp_path)))
        item = dataset[0]
    assert len(dataset) == 3
    assert item['inputs'].shape == (3, 128, 96)  # the demo's crop, (C, H, W)
    assert item['data_samples'].gt_instances.keypoints.shape == (1, 17, 2)


# ------------------------------------------------------------------ end to end
DEMO_EPOCHS = 8


def _demo_config(tmp_path, root: str) -> str:
    """The demo config on the generated data at ``root``, a short schedule, no workers."""
    loader = "num_workers=0, persistent_workers=False, dataset=dict(data_root=data_root)"
    return write_config(tmp_path / 'pose_demo.py', f'''_base_ = {DEMO!r}
data_root = {root + '/'!r}
train_dataloader = dict({loader})
val_dataloader = dict({loader})
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/person_keypoints_validation.json')
test_evaluator = val_evaluator
max_epochs = {DEMO_EPOCHS}
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
param_scheduler = [
    dict(type='LinearLR', begin=0, end=20, start_factor=0.01, by_epoch=False),
    dict(type='CosineAnnealingLR', T_max=max_epochs, eta_min=1e-5, begin=0, end=max_epochs,
         by_epoch=True),
]
default_hooks = dict(logger=dict(interval=4), checkpoint=dict(interval=max_epochs))
''')


@pytest.mark.e2e
def test_demo_learns_with_mmposes_own_train_and_test_tools(tmp_path):
    if refused_where_missing('mmpose', EVT_T):
        return
    from mmevt.apis import toolkit_tool_path
    from mmevt.datasets import generate_keypoints
    root = str(tmp_path / 'data')
    generate_keypoints(root, 64, 16, (128, 128), seed=0)
    cfg = _demo_config(tmp_path, root)
    work = str(tmp_path / 'work')
    log = run_tool(toolkit_tool_path('mmpose', 'train'), cfg, '--work-dir', work)
    assert f'Epoch(train) [{DEMO_EPOCHS}][4/4]' in log, log[-3000:]
    losses = [float(x) for x in re.findall(r'\(train\).*?\s+loss: ([\d.]+)', log)]
    assert len(losses) >= 4 and losses[-1] < losses[0], losses
    # the untrained model: the config's, freshly initialised as the runner does
    untrained = save_untrained(cfg, tmp_path / 'untrained.pth')

    def test_ap(ckpt: str, name: str) -> float:
        out = run_tool(toolkit_tool_path('mmpose', 'test'), cfg, ckpt, '--work-dir',
                       str(tmp_path / name))
        return last_metric(out, 'coco/AP')

    trained = test_ap(osp.join(work, f'epoch_{DEMO_EPOCHS}.pth'), 't1')
    before = test_ap(untrained, 't0')
    assert trained > before + 0.2, (trained, before)
