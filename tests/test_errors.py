"""User-facing errors of the modules and helpers name the bad value and what is allowed."""
import pytest
import torch

from mmevt.models.layers import (BiLevelRoutingAttention, ExternalAttention,
                                 SpatialDecayAttention, build_norm)


@pytest.mark.parametrize('build,match', [
    (lambda: SpatialDecayAttention(16, 3), r'num_heads \(3\) must be positive and divide '
                                           r'embed_dims \(16\)'),
    (lambda: SpatialDecayAttention(16, 2, group_size=0), r'group_size must be a positive int, '
                                                         r'got 0'),
    (lambda: SpatialDecayAttention(6, 2, use_rope=True), r'use_rope needs an even head dim, '
                                                         r'got 3'),
    (lambda: SpatialDecayAttention(16, 2, mode='swin'), r"mode must be one of .*'window', "
                                                        r"'grid', .*got 'swin'"),
    (lambda: SpatialDecayAttention(16, 2, mode='grid', group_size=50),
     r"mode 'grid' needs a square group_size .* got 50"),
    (lambda: ExternalAttention(16, 5), r'num_heads \(5\) must be positive and divide'),
    (lambda: ExternalAttention(16, 2, memory_size=0), r'memory_size must be positive, got 0'),
    (lambda: BiLevelRoutingAttention(16, 3), r'num_heads \(3\) must be positive and divide'),
    (lambda: build_norm('BN', 8), r"norm_cfg must be a dict with a 'type' key, got 'BN'"),
])
def test_module_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_classification_generator_rejects_tiny_images(tmp_path):
    from mmevt.datasets import generate_shape_classes
    with pytest.raises(ValueError, match=r'img_size must be at least 32 x 32, got \(16, 16\)'):
        generate_shape_classes(str(tmp_path), 1, 1, (16, 16))


def test_subset_accuracy_errors():
    import mmevt  # noqa: F401
    from mmevt.evaluation import SubsetAccuracy
    with pytest.raises(ValueError, match='needs indices, or subset_wnids and imagenet_wnids'):
        SubsetAccuracy(subset_wnids=['n1'])
    metric = SubsetAccuracy(indices=[3, 7])
    with pytest.raises(ValueError, match=r'gives 5 scores; the subset needs index 7'):
        metric.process(None, [dict(pred_score=torch.zeros(5), gt_label=torch.tensor([0]))])
    with pytest.raises(ValueError, match='needs pred_score'):
        metric.process(None, [dict(pred_label=torch.tensor([0]), gt_label=torch.tensor([0]))])
    with pytest.raises(FileNotFoundError, match="wnid source '/nonexistent' is neither"):
        SubsetAccuracy(subset_wnids='/nonexistent', imagenet_wnids=['n1'])


@pytest.mark.e2e
def test_rollout_tool_refuses_a_mismatching_checkpoint(tmp_path, shapes_root):
    import os.path as osp

    from helpers import CONFIGS, run_tool
    from mmevt.models import EVT
    ckpt = tmp_path / 'other.pth'
    torch.save({'state_dict': EVT('evt-test').state_dict()}, ckpt)  # not the demo's arch
    out = run_tool('tools/visualization/visualize_attention.py', 'rollout',
                   osp.join(CONFIGS, 'demo', 'mask-rcnn_evt-demo_fpn_shapes.py'),
                   osp.join(shapes_root, 'images', 'validation', '000000.jpg'),
                   '--checkpoint', str(ckpt), '--out', str(tmp_path / 'r.png'), check=False)
    assert out.returncode != 0 and 'backbone keys do not match' in out.stdout
