"""mmaction2 (upstream only): the TSN configs, mmevt's wheel of mmaction2 1.2.0, the generated
rawframes and the TSN demo end to end with mmaction2's own tools/train.py and tools/test.py."""
import os
import os.path as osp
import re
from importlib import metadata

import pytest
import torch

from helpers import (CONFIGS, demo_config_on, last_metric, load_config, load_tool,
                     refused_where_missing, run_tool, save_untrained, unscoped)

TSN = osp.join(CONFIGS, 'action', 'tsn')
EVT_T = osp.join(TSN, 'tsn_evt-t_8xb32-1x1x3-100e_kinetics400-rgb.py')
RECIPE = ('mmaction::recognition/tsn/custom_backbones/'
          'tsn_imagenet-pretrained-swin-transformer_8xb32-1x1x3-100e_kinetics400-rgb.py')
DEMO = osp.join(CONFIGS, 'demo', 'tsn_evt-test_1x1x3_moving-shapes-64x64.py')


# ------------------------------------------------------------------ configs
def test_config_is_mmaction2s_tsn_recipe_with_the_backbone_swapped():
    if refused_where_missing('mmaction', EVT_T):
        return
    from mmevt.swap import load_src
    ours, recipe = (unscoped(c.to_dict()) for c in (load_config(EVT_T), load_src(RECIPE)))
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
    if refused_where_missing('mmaction', EVT_T):
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
    if refused_where_missing('mmaction', EVT_T):
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
    if refused_where_missing('mmaction', EVT_T):
        return
    import mmaction.models  # noqa: F401  failed on mmaction2 1.2.0 as released
    from mmaction.registry import MODELS
    with pytest.raises(NotImplementedError,
                       match=r'mmaction2 1\.2\.0 .*open-mmlab/mmaction2/issues/2714'):
        MODELS.build(dict(type='DRN', vocab_size=1, feature_dim=1))


def test_video_files_decode_beside_numpy_2(tmp_path):
    # mmaction2's own video path (DecordInit, SampleFrames, DecordDecode) with decord 0.6.0
    if refused_where_missing('mmaction', EVT_T):
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
    if refused_where_missing('mmaction', EVT_T):
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


@pytest.mark.e2e
def test_demo_learns_with_mmaction2s_own_train_and_test_tools(tmp_path):
    if refused_where_missing('mmaction', EVT_T):
        return
    from scipy.stats import binom

    from mmevt.apis import toolkit_tool_path
    from mmevt.datasets import generate_rawframes
    assert binom.ppf(0.999, N_VAL, 1 / K) / N_VAL == CHANCE_Q999
    root = str(tmp_path / 'data')
    generate_rawframes(root, 16, N_VAL // K, 8, (64, 64), seed=0)
    cfg = demo_config_on(tmp_path / 'action_demo.py', DEMO, root)
    work = str(tmp_path / 'work')
    log = run_tool(toolkit_tool_path('mmaction', 'train'), cfg, '--work-dir', work)
    assert f'Epoch(train) [{DEMO_EPOCHS}][8/8]' in log, log[-3000:]
    untrained = save_untrained(cfg, tmp_path / 'untrained.pth')

    def test_top1(ckpt: str, name: str) -> float:
        out = run_tool(toolkit_tool_path('mmaction', 'test'), cfg, ckpt, '--work-dir',
                       str(tmp_path / name))
        assert f'Epoch(test) [{N_VAL // 8}/{N_VAL // 8}]' in out, out[-3000:]
        return last_metric(out, 'acc/top1')

    trained = test_top1(osp.join(work, f'epoch_{DEMO_EPOCHS}.pth'), 't1')
    before = test_top1(untrained, 't0')
    assert trained > CHANCE_Q999 >= before, (trained, before)


# ------------------------------------------------------------------ mmevt-swap and FLOPs
TSN_R50 = ('mmaction::recognition/tsn/'
           'tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_kinetics400-rgb.py')
# mmaction2's models a 2D EVT cannot replace the backbone of, with the reason the swap gives
REFUSED = {
    'tsm': ('mmaction::recognition/tsm/tsm_imagenet-pretrained-r50_8xb16-1x1x8-50e_kinetics400-'
            'rgb.py', r"Recognizer2D with backbone ResNetTSM cannot be swapped: ResNetTSM "
            r"mixes the frames of a clip inside the backbone \(TSM's temporal shift\); EVT is "
            r'a 2D backbone without a temporal shift, so the swap would silently drop'),
    'i3d': ('mmaction::recognition/i3d/i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e_kinetics400-'
            'rgb.py', r'Recognizer3D \(backbone ResNet3d\) cannot be swapped: it takes 3D clips'),
    'video-swin': ('mmaction::recognition/swin/swin-tiny-p244-w877_in1k-pre_8xb8-amp-32x2x1-30e_'
                   'kinetics400-rgb.py', r'Recognizer3D \(backbone SwinTransformer3D\) cannot '
                   r'be swapped: it takes 3D clips .*not a 2D swap'),
    'skeleton': ('mmaction::skeleton/stgcn/stgcn_8xb16-bone-motion-u100-80e_ntu120-xsub-'
                 'keypoint-2d.py', r'RecognizerGCN \(backbone STGCN\) cannot be swapped: it '
                 'takes skeleton keypoint sequences'),
    'audio': ('mmaction::recognition_audio/resnet/tsn_r18_8xb320-64x1x1-100e_kinetics400-audio-'
              'feature.py', r'RecognizerAudio \(backbone ResNet\) cannot be swapped: it takes '
              'audio spectrograms'),
    'flow': ('mmaction::recognition/tsn/tsn_imagenet-pretrained-r50_8xb32_5x1x3-110e_kinetics400-'
             'flow.py', r"Recognizer2D with backbone ResNet cannot be swapped: ResNet takes "
             r"10-channel frames \(e.g. stacked optical flow\)"),
}


def _mim_path(src: str) -> str:
    """The file of an ``mmaction::`` config (mmaction2's own tools take files)."""
    import mmaction
    return osp.join(osp.dirname(mmaction.__file__), '.mim', 'configs', src.split('::')[1])


def _comments(text: str) -> str:
    """The comments of a written config joined into one line (they wrap at 95 columns)."""
    return ' '.join(line.strip().lstrip('#').strip() for line in text.splitlines()
                    if line.strip().startswith('#'))


def test_clip_segments_are_the_training_pipelines_frames():
    # config values only: runs on both stacks
    from mmengine.config import Config

    from mmevt.toolkits.mmaction import DEFAULT_SEGMENTS, clip_segments
    wrapped = dict(type='RepeatDataset', times=2, dataset=dict(pipeline=[
        dict(type='DecordInit'), dict(type='DenseSampleFrames', clip_len=2, num_clips=5)]))
    assert clip_segments(Config(dict(train_dataloader=dict(dataset=wrapped)))) == 10
    top_level = [dict(type='mmaction.SampleFrames', clip_len=1, num_clips=8)]
    assert clip_segments(Config(dict(train_pipeline=top_level))) == 8
    assert clip_segments(Config(dict(model=dict(type='Recognizer2D')))) == DEFAULT_SEGMENTS == 3
    if refused_where_missing('mmaction', EVT_T):
        return
    from mmevt.swap import load_src
    assert clip_segments(load_config(EVT_T)) == 3
    assert clip_segments(load_src(TSN_R50.replace('1x1x3', '1x1x8'))) == 8
    assert clip_segments(load_src('mmaction::recognition/c2d/c2d_r101-in1k-pre-nopool_8xb32-'
                                  '8x8x1-100e_kinetics400-rgb.py')) == 8  # clip_len 8


def test_swapped_tsn_takes_mmpretrain_evt_and_its_head_reads_the_last_map(tmp_path):
    if refused_where_missing('mmaction', EVT_T):
        return
    from mmevt.swap import swap_config
    from mmevt.toolkits import build_model
    dst = str(tmp_path / 'tsn_evt-t.py')
    plan, _, _ = swap_config(TSN_R50, 'evt-t', dst, log=lambda _: None)
    with open(dst) as f:
        text = f.read()
    cfg = load_config(dst)
    assert plan.stages == [3] and plan.outputs.describe() == '2048@1/32'
    backbone = cfg.model.backbone
    assert backbone.type == 'mmpretrain.EVT' and '_scope_' not in backbone
    assert backbone.out_indices == (3, ) and 'depth' not in backbone  # SRC's ResNet deleted
    assert cfg.model.cls_head.in_channels == 512 and cfg.model.cls_head.num_classes == 400
    assert "type: the 'mmpretrain.' prefix: mmaction2's Recognizer2D unpacks the tuple of " \
        'maps' in _comments(text)
    # --recipe evt: our TSN config's (mmaction2's TSN recipe), SRC's schedule kept
    ours = load_config(EVT_T)
    assert cfg.optim_wrapper.optimizer == ours.optim_wrapper.optimizer
    assert cfg.optim_wrapper.clip_grad == ours.optim_wrapper.clip_grad
    assert backbone.drop_path_rate == ours.model.backbone.drop_path_rate == 0.1
    assert 'param_scheduler' not in text and 'data_preprocessor' not in text  # ImageNet RGB
    # built as mmaction2 builds it: the one map of each frame unpacked for the head
    model = build_model(cfg, seed=0).eval()
    assert model.backbone_from == 'mmpretrain'
    with torch.no_grad():
        feats, kwargs = model.extract_feat(torch.randn(1, 3, 3, 224, 224), test_mode=True)
        scores = model.cls_head(feats, **kwargs)
    assert feats.shape == (3, 512, 7, 7) and scores.shape == (1, 400)


@pytest.mark.parametrize('name', list(REFUSED))
def test_what_a_2d_evt_cannot_replace_is_refused_naming_it(name, tmp_path):
    if refused_where_missing('mmaction', EVT_T):
        return
    from mmevt.swap import swap_config
    src, reason = REFUSED[name]
    dst = tmp_path / 'dst.py'
    with pytest.raises(ValueError, match=reason):
        swap_config(src, 'evt-t', str(dst), log=lambda _: None)
    assert not dst.exists()


def test_a_temporal_backbone_is_found_by_its_num_segments(monkeypatch):
    # the refusal does not rest on the table of known names: ResNetTSM takes num_segments
    if refused_where_missing('mmaction', EVT_T):
        return
    from mmevt.toolkits import mmaction as action
    monkeypatch.setattr(action, 'TEMPORAL_BACKBONES', {})
    model = dict(type='Recognizer2D', backbone=dict(type='ResNetTSM', depth=50),
                 cls_head=dict(type='TSMHead', in_channels=2048, num_classes=400))
    with pytest.raises(ValueError, match=r'a temporal module of ResNetTSM \(it takes '
                                         r'num_segments\)'):
        action.refuse_unswappable(model, 'tsm.py')
    action.refuse_unswappable(dict(model, backbone=dict(type='ResNet', depth=50)), 'tsn.py')


def test_a_generated_clip_batch_trains_the_swapped_tsn():
    # the smoke test's batch: what mmaction2's dataloader gives a 2D recognizer
    if refused_where_missing('mmaction', EVT_T):
        return
    from mmaction.structures import ActionDataSample

    from mmengine.config import Config

    from mmevt.toolkits import get_toolkit
    clip_of_5 = Config(dict(train_pipeline=[dict(type='SampleFrames', clip_len=1, num_clips=5)]))
    batch = get_toolkit('mmaction').make_batch(clip_of_5, {}, 224, 2, 3)
    assert [tuple(x.shape) for x in batch['inputs']] == [(5, 3, 224, 224)] * 2
    assert all(x.dtype == torch.uint8 for x in batch['inputs'])
    assert all(isinstance(s, ActionDataSample) for s in batch['data_samples'])
    assert [int(s.gt_label) for s in batch['data_samples']] == [0, 1]


def test_flops_of_the_tsn_config_are_a_clip_of_its_segments():
    if refused_where_missing('mmaction', EVT_T):
        return
    from mmevt.analysis import analyze_flops, config_complexity, count_params
    from mmevt.analysis.flops import build_from_config
    cfg = load_config(EVT_T)
    result = config_complexity(cfg)
    assert result['shape'] == (224, 224) and result['input_shape'] == (1, 3, 3, 224, 224)
    model, _ = build_from_config(load_config(EVT_T))
    frame = analyze_flops(model.backbone, (torch.zeros(1, 3, 224, 224), )).total()
    assert result['flops']['backbone'] == 3 * frame  # one 2D pass a frame
    # TSNHead: each frame's 512 x 7 x 7 map pooled, then 512 -> 400 on the clip's average
    assert result['flops']['heads'] == 3 * 512 * 7 * 7 + 512 * 400
    assert result['params']['total'] == count_params(model)
    assert result['params']['heads'] == 512 * 400 + 400
    # the segments follow the training pipeline; features only: mmaction2's extract_feat
    cfg.train_dataloader.dataset.pipeline[1].num_clips = 2
    cfg.model.backbone.arch = 'evt-test'
    cfg.model.cls_head.in_channels = 128
    feats = config_complexity(cfg, (96, 128), features_only=True)
    assert feats['input_shape'] == (1, 2, 3, 96, 128) and feats['flops']['heads'] is None
    tiny, _ = build_from_config(cfg)
    assert feats['flops']['total'] == feats['flops']['backbone'] == analyze_flops(
        tiny.backbone, (torch.zeros(2, 3, 96, 128), )).total()


def test_flops_of_a_3d_recognizer_are_refused():
    if refused_where_missing('mmaction', EVT_T):
        return
    from mmevt.analysis import config_complexity
    from mmevt.swap import load_src
    with pytest.raises(ValueError, match=r"Recognizer3D: only mmaction2's 2D recognizers"):
        config_complexity(load_src(REFUSED['i3d'][0]))


def _millions_pair(pattern: str, out: str) -> tuple:
    found = re.search(pattern + r': ([\d.]+) M -> ([\d.]+) M', out)
    assert found, out[-3000:]
    return tuple(float(v) for v in found.groups())


@pytest.mark.e2e
def test_swap_check_and_the_flops_tools_agree_on_tsn(tmp_path):
    """``mmevt-swap --check`` on mmaction2's TSN R50 trains a step on 3-segment clips and
    counts a clip's backbone FLOPs; mmaction2's own get_flops.py counts the same on SRC and
    on our EVT-T TSN config, and our tools/analysis/get_flops.py the same on DST."""
    if refused_where_missing('mmaction', EVT_T):
        return
    import json

    from mmevt.apis import toolkit_tool_path
    dst = str(tmp_path / 'tsn_evt-test.py')
    out = run_tool('tools/misc/swap_backbone.py', TSN_R50, '--arch', 'evt-test', '--out', dst,
                   '--check')
    assert 'check: 224 x 224 batch of 2 clips of 3 segments: loss' in out, out
    assert '2 predictions' in out
    params = _millions_pair(r'params \(whole model\)', out)
    flops = _millions_pair(r'backbone FLOPs at 3 segments x 224 x 224', out)
    # mmaction2's own tool: extract_feat (a TSN's backbone) on (1, 3 segments, 3, 224, 224)
    tool = osp.join(osp.dirname(toolkit_tool_path('mmaction', 'train')), 'analysis_tools',
                    'get_flops.py')

    def theirs(path: str) -> float:
        printed = run_tool(tool, path, '--shape', '3', '3', '224', '224')
        assert 'Input shape: (3, 3, 224, 224)' in printed, printed[-3000:]
        return float(re.search(r'Flops: ([\d.]+)G', printed).group(1))
    assert abs(theirs(_mim_path(TSN_R50)) - flops[0] / 1e3) < 1e-3  # R50: 12.328 G
    ours = str(tmp_path / 'flops.json')
    printed = run_tool('tools/analysis/get_flops.py', dst, EVT_T, '--json', ours)
    with open(ours) as f:
        results = json.load(f)
    swapped, evt_t = results[dst], results[EVT_T]
    for result in (swapped, evt_t):
        assert result['scope'] == 'mmaction' and result['input_shape'] == [1, 3, 3, 224, 224]
        assert min(result['flops']['backbone'], result['flops']['heads']) > 0
    assert round(swapped['flops']['backbone'] / 1e6, 2) == flops[1]
    assert round(swapped['params']['total'] / 1e6, 2) == params[1]
    assert abs(theirs(EVT_T) - evt_t['flops']['backbone'] / 1e9) < 1e-3
    assert f'{EVT_T}: mmaction' in printed
