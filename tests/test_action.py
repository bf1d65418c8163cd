"""mmaction2 (upstream only): the TSN configs, mmevt's wheel of mmaction2 1.2.0, the generated
rawframes and the TSN demo end to end with mmaction2's own tools/train.py and tools/test.py."""
import importlib.util
import os
import os.path as osp
import re
from importlib import metadata

import pytest
import torch

from helpers import CONFIGS, current_stack, load_config, load_tool, run_tool, write_config

TSN = osp.join(CONFIGS, 'action', 'tsn')
EVT_T = osp.join(TSN, 'tsn_evt-t_8xb32-1x1x3-100e_kinetics400-rgb.py')
RECIPE = ('mmaction::recognition/tsn/custom_backbones/'
          'tsn_imagenet-pretrained-swin-transformer_8xb32-1x1x3-100e_kinetics400-rgb.py')
DEMO = osp.join(CONFIGS, 'demo', 'tsn_evt-test_1x1x3_moving-shapes-64x64.py')


def _mmaction_installed() -> bool:
    """Whether mmaction2 is here; it is absent only on the fork stack (mmaction2 1.2.0 asserts
    mmcv < 2.2.0 and has no fork: docs/action.md), where a TSN config is refused naming it."""
    if importlib.util.find_spec('mmaction') is not None:
        return True
    assert current_stack() == 'fork', 'mmaction2 is missing from the upstream stack'
    with pytest.raises(ModuleNotFoundError, match='mmaction2 is not installed'):
        load_config(EVT_T)
    return False


def _unscoped(value):
    if isinstance(value, dict):
        return {k: _unscoped(v) for k, v in value.items() if k != '_scope_'}
    if isinstance(value, (list, tuple)):
        return type(value)(_unscoped(v) for v in value)
    return value


# ------------------------------------------------------------------ configs
def test_config_is_mmaction2s_tsn_recipe_with_the_backbone_swapped():
    if not _mmaction_installed():
        return
    from mmevt.swap import load_src
    ours, recipe = (_unscoped(c.to_dict()) for c in (load_config(EVT_T), load_src(RECIPE)))
    for cfg in (ours, recipe):
        cfg.pop('custom_imports', None)
        cfg.pop('pretrained', None)  # ours: the backbone checkpoint's name
    model, recipe_model = ours.pop('model'), recipe.pop('model')
    assert ours == recipe  # data, schedule, optimizer, runtime: the recipe's
    assert model['backbone'] == dict(
        type='mmpretrain.EVT', arch='evt-t', drop_path_rate=0.1, out_indices=(3, ),
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/evt-t_in1k.pth',
                      prefix='backbone.'))
    assert model['cls_head'] == dict(recipe_model['cls_head'], in_channels=512)
    for key in set(model) | set(recipe_model):
        if key not in ('backbone', 'cls_head'):
            assert model.get(key) == recipe_model.get(key), key


def test_tsn_reads_evts_stride_32_map_of_every_segment():
    if not _mmaction_installed():
        return
    from mmevt.toolkits import build_model
    cfg = load_config(EVT_T)
    cfg.model.backbone.init_cfg = None
    model = build_model(cfg, seed=0).eval()
    clips = torch.randn(2, 3, 3, 224, 224)  # (N, segments, C, H, W)
    with torch.no_grad():
        feats, kwargs = model.extract_feat(clips, test_mode=True)
        scores = model.cls_head(feats, **kwargs)  # consensus over the 3 segments
    assert feats.shape == (6, 512, 7, 7)  # one map a frame: N x segments
    assert scores.shape == (2, 400)


# ------------------------------------------------------------------ mmevt's mmaction2 wheel
def test_mmaction2_is_mmevts_wheel_and_every_file_is_in_its_record():
    if not _mmaction_installed():
        return
    import mmaction
    dist = metadata.distribution('mmaction2')
    assert dist.version == mmaction.__version__ == '1.2.0+mmevt1'
    recorded = {str(f) for f in dist.files}
    for stub in ('mmaction/models/localizers/drn/__init__.py',
                 'mmaction/models/localizers/drn/drn.py'):
        assert stub in recorded
    # no loose file under the package: pip uninstall removes everything
    site = osp.dirname(osp.dirname(mmaction.__file__))
    for folder, _, files in os.walk(osp.dirname(mmaction.__file__)):
        for name in files:
            rel = osp.relpath(osp.join(folder, name), site)
            assert rel in recorded or '__pycache__' in rel, rel
    # the dependencies PyPI's 1.2.0 wheel declares (written back from the sdist's egg-info)
    requires = {re.split(r'[ ;<>=]', r)[0] for r in dist.requires if 'extra' not in r}
    assert requires == {'decord', 'einops', 'matplotlib', 'numpy', 'opencv-contrib-python',
                        'Pillow', 'scipy', 'torch'}
    # one distribution owns cv2: opencv-contrib-python is not installed beside opencv-python
    owners = metadata.packages_distributions()['cv2']
    assert sorted(set(owners)) == ['opencv-python'], owners


def test_drn_stand_in_imports_and_refuses_to_build():
    if not _mmaction_installed():
        return
    import mmaction.models  # noqa: F401  failed on mmaction2 1.2.0 as released
    from mmaction.registry import MODELS
    with pytest.raises(NotImplementedError,
                       match=r'mmaction2 1\.2\.0 .*open-mmlab/mmaction2/issues/2714'):
        MODELS.build(dict(type='DRN', vocab_size=1, feature_dim=1))


def test_video_files_decode_beside_numpy_2(tmp_path):
    # mmaction2's own video path (DecordInit, SampleFrames, DecordDecode) with decord 0.6.0
    if not _mmaction_installed():
        return
    import cv2
    import numpy as np
    from mmaction.datasets.transforms import DecordDecode, DecordInit, SampleFrames
    path = str(tmp_path / 'clip.avi')
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*'MJPG'), 10, (64, 48))
    for i in range(12):
        writer.write(np.full((48, 64, 3), 20 * i, np.uint8))
    writer.release()
    results = dict(filename=path, start_index=0, modality='RGB')
    for step in (DecordInit(), SampleFrames(clip_len=1, num_clips=3, test_mode=True),
                 DecordDecode()):
        results = step(results)
    frames = np.stack(results['imgs'])
    assert frames.shape == (3, 48, 64, 3) and frames.dtype == np.uint8
    # the grey levels written at the frames sampled, up to MJPG's rounding
    expected = 20 * results['frame_inds']
    assert np.abs(frames.reshape(3, -1).mean(1) - expected).max() < 3, (frames.mean(), expected)


# ------------------------------------------------------------------ generated rawframes
def test_rawframes_generator_is_deterministic_and_never_overwrites(tmp_path):
    from mmevt.datasets import ACTION_CLASSES, generate_rawframes
    a, b = tmp_path / 'a', tmp_path / 'b'
    generate_rawframes(str(a), 2, 1, 4, (32, 48), seed=3)
    anns = generate_rawframes(str(b), 2, 1, 4, (32, 48), seed=3)
    for rel in ('train_list_rawframes.txt', 'rawframes/val/circle_0000/img_00004.jpg'):
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    generate_rawframes(str(a), 2, 1, 4, (32, 48), seed=3)  # same settings: reused
    with pytest.raises(FileExistsError, match='holds a rawframes dataset made with'):
        generate_rawframes(str(a), 3, 1, 4, (32, 48), seed=3)
    with pytest.raises(ValueError, match='num_frames must be at least 3'):
        generate_rawframes(str(tmp_path / 'c'), 1, 1, 2)
    with pytest.raises(ValueError, match=r'img_size must be at least 32 x 32'):
        generate_rawframes(str(tmp_path / 'c'), 1, 1, 4, (16, 64))
    lines = open(anns['train']).read().split('\n')[:-1]
    assert len(lines) == 2 * len(ACTION_CLASSES)
    for line in lines:
        clip, frames, label = line.split()
        assert frames == '4' and clip.split('/')[1].startswith(ACTION_CLASSES[int(label)])
        assert sorted(os.listdir(b / 'rawframes' / clip)) == [
            f'img_{i:05d}.jpg' for i in range(1, 5)]


def test_generator_command_line_writes_rawframes(tmp_path, capsys):
    make_shapes = load_tool('tools/misc/make_shapes.py')
    make_shapes.main([str(tmp_path), '--rawframes', '--num-train', '1', '--num-val', '1',
                      '--frames', '3', '--size', '32', '32'])
    assert 'train:' in capsys.readouterr().out
    assert (tmp_path / 'rawframes' / 'val' / 'square_0000' / 'img_00003.jpg').is_file()
    with pytest.raises(SystemExit):
        make_shapes.main([str(tmp_path), '--rawframes', '--keypoints'])
    assert '--keypoints and --rawframes exclude each other' in capsys.readouterr().err


def test_generated_rawframes_load_in_mmaction2s_rawframe_dataset(tmp_path):
    if not _mmaction_installed():
        return
    from mmevt.datasets import generate_rawframes
    from mmevt.toolkits import toolkit_scope
    generate_rawframes(str(tmp_path), 1, 2, 8, (64, 64), seed=1)
    cfg = load_config(DEMO)
    with toolkit_scope('mmaction'):
        from mmaction.registry import DATASETS
        dataset = DATASETS.build(dict(cfg.val_dataloader.dataset, data_root=str(tmp_path)))
        item = dataset[0]
    assert len(dataset) == 8 and dataset.get_data_info(0)['label'] == 0
    assert item['inputs'].shape == (3, 3, 64, 64)  # 3 segments of (C, H, W)


# ------------------------------------------------------------------ end to end
DEMO_EPOCHS = 12
N_VAL, K = 32, 4  # validation clips (8 a class), classes
# top-1 above the 99.9% quantile of Binomial(32, 1/4) (16 of 32, scipy.stats.binom.ppf):
# a model that guesses is this right once in a thousand runs
CHANCE_Q999 = 16 / 32


def _demo_config(tmp_path, root: str) -> str:
    return write_config(tmp_path / 'action_demo.py', f'''_base_ = {DEMO!r}
data_root = {root + '/'!r}
train_dataloader = dict(dataset=dict(data_root=data_root))
val_dataloader = dict(dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
''')


def _top1(log: str) -> float:
    found = re.findall(r'acc/top1: ([\d.]+)', log)
    assert found, log[-3000:]
    return float(found[-1])


@pytest.mark.e2e
def test_demo_learns_with_mmaction2s_own_train_and_test_tools(tmp_path):
    if not _mmaction_installed():
        return
    from scipy.stats import binom

    from mmevt.apis import toolkit_tool_path
    from mmevt.datasets import generate_rawframes
    from mmevt.toolkits import build_model
    assert binom.ppf(0.999, N_VAL, 1 / K) / N_VAL == CHANCE_Q999
    root = str(tmp_path / 'data')
    generate_rawframes(root, 16, N_VAL // K, 8, (64, 64), seed=0)
    cfg = _demo_config(tmp_path, root)
    work = str(tmp_path / 'work')
    log = run_tool(toolkit_tool_path('mmaction', 'train'), cfg, '--work-dir', work)
    assert f'Epoch(train) [{DEMO_EPOCHS}][8/8]' in log, log[-3000:]
    model = build_model(load_config(cfg), seed=0)  # untrained, initialised as the runner does
    model.init_weights()
    untrained = str(tmp_path / 'untrained.pth')
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, untrained)

    def test_top1(ckpt: str, name: str) -> float:
        out = run_tool(toolkit_tool_path('mmaction', 'test'), cfg, ckpt, '--work-dir',
                       str(tmp_path / name))
        assert f'Epoch(test) [{N_VAL // 8}/{N_VAL // 8}]' in out, out[-3000:]
        return _top1(out)

    trained = test_top1(osp.join(work, f'epoch_{DEMO_EPOCHS}.pth'), 't1')
    before = test_top1(untrained, 't0')
    assert trained > CHANCE_Q999 >= before, (trained, before)
