"""The training recipes in configs/ are the published ones (RMT authors' configs and logs,
Swin's configs), read back from the built configs."""
import glob
import os.path as osp

import pytest

from det_tiny import tiny_det_config
from helpers import CONFIGS, load_config, run_tool, write_config

# (lr, weight decay, drop path) of every detection config. Sources: the RMT authors'
# detect/configs/RMT/*.py (T/S/B/L = their t/s/m/l); T at 3x and in Cascade is ours (from
# S); EVT-Swin is Swin's recipe (lr 1e-4, wd 0.05, drop path 0.2 / 0.2 / 0.3).
_DP = {'t': 0.1, 's': 0.15, 'b': 0.4}
_SWIN = {'evt-swin-t': 0.2, 'evt-swin-s': 0.2, 'evt-swin-b': 0.3}
DET = {}
for fam, dp_l in (('evt', 0.55), ('rmt', 0.5)):
    dp = dict(_DP, l=dp_l)
    for s, lr in dict(t=4e-4, s=4e-4, b=4e-4, l=2e-4).items():
        DET[f'mask-rcnn_{fam}-{s}_fpn_1x_coco'] = (lr, 0.05, dp[s])
        DET[f'retinanet_{fam}-{s}_fpn_1x_coco'] = (lr, 1e-4, dp[s])
    for s, lr in dict(t=4e-4, s=4e-4, b=2e-4, l=2e-4).items():
        if f'{fam}-{s}' != 'rmt-t':  # no RMT-T 3x config
            DET[f'mask-rcnn_{fam}-{s}_fpn_ms-3x_coco'] = (lr, 0.05, dp[s])
    for s, lr in dict(t=4e-4, s=4e-4, b=2e-4).items():
        DET[f'cascade-mask-rcnn_{fam}-{s}_fpn_ms-3x_coco'] = (lr, 0.05, dp[s])
# opt-in layer-wise lr decay: the evt-t 1x recipe plus the constructor
DET['mask-rcnn_evt-t_fpn_layer-decay_1x_coco'] = DET['mask-rcnn_evt-t_fpn_1x_coco']
for arch, dp in _SWIN.items():
    for name in (f'mask-rcnn_{arch}_fpn_1x_coco', f'mask-rcnn_{arch}_fpn_ms-3x_coco',
                 f'cascade-mask-rcnn_{arch}_fpn_ms-3x_coco', f'retinanet_{arch}_fpn_1x_coco'):
        DET[name] = (1e-4, 0.05, dp)

DET_PATHS = sorted(p for p in glob.glob(osp.join(CONFIGS, 'det', '*', '*.py'))
                   if '_base_' not in p)


def _cfg(rel):
    return load_config(osp.join(CONFIGS, rel))


def test_every_det_config_is_in_the_table():
    assert sorted(osp.splitext(osp.basename(p))[0] for p in DET_PATHS) == sorted(DET)


@pytest.mark.parametrize('path', DET_PATHS, ids=[osp.basename(p)[:-3] for p in DET_PATHS])
def test_det_lr_weight_decay_drop_path_warmup(path):
    cfg = _cfg(path)
    name = osp.splitext(osp.basename(path))[0]
    lr, wd, dp = DET[name]
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.weight_decay, opt.betas) == ('AdamW', lr, wd, (0.9, 0.999))
    assert cfg.model.backbone.drop_path_rate == dp
    # no-decay rules: the authors' Mask R-CNN ('*norm*' by name, their stem BNs decay),
    # Cascade (every norm layer), RetinaNet (none); Swin's ('*norm*' by name)
    paramwise = cfg.optim_wrapper.get('paramwise_cfg', {})
    by_name = {'norm': dict(decay_mult=0.)}
    if 'swin' in name:
        expected = dict(custom_keys=by_name)
    elif name.startswith('mask-rcnn_'):
        expected = dict(custom_keys={'backbone.stem': dict(decay_mult=1.), **by_name})
    elif name.startswith('cascade-'):
        expected = dict(norm_decay_mult=0.)
    else:
        expected = {}
    if 'layer-decay' in name:  # mmdet's ConvNeXt-T Mask R-CNN rate
        expected['layer_decay_rate'] = 0.95
        assert cfg.optim_wrapper.constructor == 'EVTLayerDecayOptimWrapperConstructor'
    else:
        assert 'constructor' not in cfg.optim_wrapper
    assert {k: v for k, v in paramwise.items() if k != '_delete_'} == expected
    warmup, steps = cfg.param_scheduler
    swin_warmup = 'swin' in name and not name.startswith('retinanet_')
    assert (warmup.type, warmup.end, warmup.start_factor) == (
        'LinearLR', 1000 if swin_warmup else 500, 0.001)
    epochs, milestones = (36, [27, 33]) if '3x' in name else (12, [8, 11])
    assert cfg.train_cfg.max_epochs == steps.end == epochs and steps.milestones == milestones
    # batch 16 = 8 GPUs x 2, except the authors' L 3x: 8 x 1 at lr 2e-4
    batch = 1 if name.endswith('-l_fpn_ms-3x_coco') else 2
    assert cfg.train_dataloader.batch_size == batch
    assert cfg.auto_scale_lr.base_batch_size == 8 * batch
    # the RMT configs' output norms are the authors' (nn.LayerNorm eps 1e-5)
    out_norm = cfg.model.backbone.get('out_norm_cfg')
    assert (out_norm == dict(type='LN', eps=1e-5)) == ('_rmt-' in name)


@pytest.mark.parametrize('rel', ['det/mask_rcnn/mask-rcnn_evt-s_fpn_ms-3x_coco.py',
                                 'det/cascade_rcnn/cascade-mask-rcnn_rmt-b_fpn_ms-3x_coco.py'])
def test_3x_pipeline_is_swins_ms_crop(rel):
    from mmcv.transforms import RandomChoice, RandomChoiceResize
    from mmdet.datasets.transforms import RandomCrop, RandomFlip
    from mmdet.registry import TRANSFORMS
    from mmdet.utils import register_all_modules
    register_all_modules(init_default_scope=False)  # no global scope left for later tests
    cfg = _cfg(rel)
    built = [TRANSFORMS.build(t) for t in cfg.train_dataloader.dataset.pipeline]
    flip = next(t for t in built if isinstance(t, RandomFlip))
    assert flip.prob == 0.5
    choice = next(t for t in built if isinstance(t, RandomChoice))
    multi_scale, crop_branch = choice.transforms
    scales = [sorted(s) for s in multi_scale.transforms[0].scales]
    assert scales == [[short, 1333] for short in range(480, 801, 32)]
    first, crop, last = crop_branch.transforms
    assert isinstance(first, RandomChoiceResize) and isinstance(last, RandomChoiceResize)
    assert [sorted(s) for s in first.scales] == [[400, 1333], [500, 1333], [600, 1333]]
    assert isinstance(crop, RandomCrop)
    assert (crop.crop_type, crop.crop_size, crop.allow_negative_crop) == (
        'absolute_range', (384, 600), True)
    assert [sorted(s) for s in last.scales] == scales


def test_cascade_heads_are_the_authors_4conv1fc_giou():
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    register_all_modules(init_default_scope=False)  # no global scope left for later tests
    cfg = _cfg('det/cascade_rcnn/cascade-mask-rcnn_evt-s_fpn_ms-3x_coco.py')
    cfg.model.backbone.init_cfg = None
    model = MODELS.build(cfg.model)
    stds = [[0.1, 0.1, 0.2, 0.2], [0.05, 0.05, 0.1, 0.1], [0.033, 0.033, 0.067, 0.067]]
    for head, head_cfg, std in zip(model.roi_head.bbox_head, cfg.model.roi_head.bbox_head,
                                   stds):
        assert type(head).__name__ == 'ConvFCBBoxHead'
        assert (head.num_shared_convs, head.num_shared_fcs, head.fc_out_channels) == (4, 1, 1024)
        assert type(head.shared_convs[0].bn).__name__ == 'SyncBatchNorm'
        assert type(head.loss_bbox).__name__ == 'GIoULoss' and head.loss_bbox.loss_weight == 10
        assert head.reg_decoded_bbox and not head.reg_class_agnostic
        assert list(head.bbox_coder.stds) == std and head_cfg.bbox_coder.target_stds == std


def test_imagenet_recipe_is_the_authors():
    cfg = _cfg('cls/evt/evt-t_8xb128_in1k.py')
    warmup, cosine = cfg.param_scheduler
    assert (warmup.type, warmup.end, warmup.start_factor) == ('LinearLR', 5, 1e-3)
    assert (cosine.type, cosine.begin, cosine.eta_min) == ('CosineAnnealingLR', 5, 1e-5)
    assert cfg.optim_wrapper.optimizer.lr == 1e-3 and cfg.train_dataloader.batch_size == 128
    assert cfg.train_dataloader.sampler.type == 'RepeatAugSampler'
    ema, = [h for h in cfg.custom_hooks if h.type == 'EMAHook']
    assert ema.momentum == pytest.approx(1 - 0.99996**(1024 / 512), rel=1e-3)
    assert ema.update_buffers
    assert cfg.sync_bn == 'torch'
    header = open(osp.join(CONFIGS, 'cls/evt/evt-t_8xb128_in1k.py')).read().split('_base_')[0]
    assert '5 linear warm-up epochs' in header and "paper's recipe" not in header
    assert cfg.optim_wrapper.get('clip_grad') is None  # the authors' --clip-grad: None
    # the 384 fine-tunes are Swin's: no EMA, no repeated augmentation, clipping at norm 5
    for size in 'bl':
        ft = _cfg(f'cls/evt/evt-{size}_in1k-pre_8xb128_in1k-384px.py')
        assert ft.custom_hooks == [] and ft.train_dataloader.sampler.type == 'DefaultSampler'
        assert ft.optim_wrapper.clip_grad == dict(max_norm=5.0)


@pytest.mark.parametrize('size,dp,dims', [('t', 0.2, 768), ('s', 0.3, 768), ('b', 0.5, 1024)])
def test_evt_swin_imagenet_is_swins_recipe(size, dp, dims):
    cfg = _cfg(f'cls/evt-swin/evt-swin-{size}_16xb64_in1k.py')
    assert cfg.model.backbone.arch == f'evt-swin-{size}'
    assert cfg.model.backbone.drop_path_rate == dp
    assert (cfg.model.neck.type, cfg.model.head.type, cfg.model.head.in_channels) == (
        'GlobalAveragePooling', 'LinearClsHead', dims)
    assert cfg.train_dataloader.batch_size == 64 and cfg.optim_wrapper.optimizer.lr == 1e-3
    assert cfg.optim_wrapper.clip_grad == dict(max_norm=5.0)
    assert cfg.param_scheduler[0].end == 20 and not cfg.get('custom_hooks')


def test_segmentation_recipe_details():
    fpn = _cfg('seg/sem_fpn/fpn_evt-s_8xb2-80k_ade20k-512x512.py')
    poly, = fpn.param_scheduler
    assert (poly.type, poly.power, poly.eta_min, poly.end) == ('PolyLR', 0.9, 1e-6, 80000)
    for size in 'tsb':
        uper = _cfg(f'seg/upernet/upernet_evt-swin-{size}_8xb2-160k_ade20k-512x512.py')
        assert uper.model.backbone.drop_path_rate == 0.3
    rmt = _cfg('seg/upernet/upernet_rmt-s_8xb2-160k_ade20k-512x512.py')
    assert rmt.model.backbone.out_norm_cfg == dict(type='LN', eps=1e-5)


# The 3x ms-crop recipe shrunk for the CPU: the same transforms as
# configs/det/_base_/ms-crop-3x_coco-instance.py with sizes scaled to the suite's 96 x 128
# generated images (restated here only), one short epoch.
SMALL_MS_CROP = '''
small_scales = [(160, s) for s in range(80, 129, 16)]
train_dataloader['dataset']['pipeline'] = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='RandomChoice', transforms=[
        [dict(type='RandomChoiceResize', scales=small_scales, keep_ratio=True)],
        [dict(type='RandomChoiceResize', scales=[(160, 64), (160, 80), (160, 96)],
              keep_ratio=True),
         dict(type='RandomCrop', crop_type='absolute_range', crop_size=(48, 80),
              allow_negative_crop=True),
         dict(type='RandomChoiceResize', scales=small_scales, keep_ratio=True)]]),
    dict(type='PackDetInputs'),
]
train_cfg = dict(max_epochs=1, val_interval=1)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=2),
    dict(type='MultiStepLR', begin=0, end=1, by_epoch=True, milestones=[1], gamma=0.1),
]
'''


@pytest.mark.e2e
def test_small_ms_crop_3x_trains_and_tests(shapes_root, tmp_path):
    base = osp.join(CONFIGS, 'det', 'mask_rcnn', 'mask-rcnn_evt-t_fpn_ms-3x_coco.py')
    work = str(tmp_path / 'work')
    cfg = write_config(tmp_path / 'ms_crop.py',
                       tiny_det_config(base, shapes_root, work, extra=SMALL_MS_CROP))
    log = run_tool('tools/train.py', cfg)
    assert 'RandomChoice' in log and 'RandomCrop' in log  # the dumped config ran
    out = run_tool('tools/test.py', cfg, osp.join(work, 'epoch_1.pth'), '--work-dir',
                   str(tmp_path / 'test'))
    assert 'coco/bbox_mAP:' in out and 'coco/segm_mAP:' in out


def _decay_of(cfg, model):
    """weight decay each parameter gets from the config's optim_wrapper."""
    from mmengine.optim import build_optim_wrapper
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: g['weight_decay'] for g in wrapper.optimizer.param_groups
            for p in g['params']}


def test_no_decay_rules_are_the_sources():
    import torch.nn as nn
    from mmpretrain.registry import MODELS
    from mmpretrain.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    # ImageNet (authors, timm's rule): no decay on 1-D tensors and biases, but layer-scale
    # gammas decay (theirs are (1, 1, 1, C))
    cfg = _cfg('cls/rmt/rmt-b_8xb128_in1k.py')
    cfg.model.backbone.arch = 'rmt-test'
    cfg.model.neck.in_channels = 128
    wd = _decay_of(cfg, MODELS.build(cfg.model))
    assert wd['backbone.stages.2.blocks.0.ls1.gamma'] == 0.05
    assert wd['backbone.stages.2.blocks.0.attn.q.weight'] == 0.05
    assert wd['backbone.stages.2.blocks.0.attn.q.bias'] == 0
    assert wd['backbone.stem.0.norm.weight'] == wd['backbone.stages.0.blocks.0.norm1.weight'] == 0

    # detection / UperNet (authors, by name '*norm*'): the stem's BNs decay like theirs
    # (patch_embed.proj.N), block / downsampling / output norms do not; Swin: every '*norm*'
    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            from mmevt.models import EVT
            self.backbone = EVT('evt-test')
    for rel, stem in [('det/mask_rcnn/mask-rcnn_rmt-s_fpn_1x_coco.py', 0.05),
                      ('seg/upernet/upernet_rmt-s_8xb2-160k_ade20k-512x512.py', 0.01),
                      ('det/mask_rcnn/mask-rcnn_evt-swin-t_fpn_1x_coco.py', 0),
                      ('seg/upernet/upernet_evt-swin-t_8xb2-160k_ade20k-512x512.py', 0)]:
        cfg = _cfg(rel)
        wd = _decay_of(cfg, Backbone())
        base = cfg.optim_wrapper.optimizer.weight_decay
        assert wd['backbone.stem.0.norm.weight'] == stem, rel
        assert wd['backbone.stages.1.downsample.norm.weight'] == 0, rel
        assert wd['backbone.stages.1.blocks.0.norm1.weight'] == wd['backbone.norm3.bias'] == 0
        assert wd['backbone.stages.1.blocks.0.attn.q.weight'] == base, rel
    # Semantic FPN (authors) and RMT RetinaNet: weight decay on every parameter
    for rel in ('seg/sem_fpn/fpn_rmt-s_8xb2-80k_ade20k-512x512.py',
                'det/retinanet/retinanet_rmt-s_fpn_1x_coco.py'):
        cfg = _cfg(rel)
        assert set(_decay_of(cfg, Backbone()).values()) == {cfg.optim_wrapper.optimizer.weight_decay}
