"""Attention pictures: dense attention matrices are exact; the tool writes PNGs."""
import os.path as osp

import pytest
import torch
from PIL import Image
from torch import nn

from helpers import CONFIGS, run_tool
from mmevt.analysis import dense_attention, visible_mask
from mmevt.models.layers import SpatialDecayAttention


@pytest.mark.parametrize('mode,decay,rope', [('full', 'euclidean', False),
                                             ('group', 'euclidean', False),
                                             ('dilate', 'manhattan', True),
                                             ('window', 'euclidean', False),
                                             ('grid', 'none', False),
                                             ('decomposed', 'manhattan', True)])
def test_dense_attention_reproduces_the_module(mode, decay, rope):
    torch.manual_seed(0)
    attn = SpatialDecayAttention(16, 2, mode=mode, decay=decay,
                                 group_size=4 if mode in ('window', 'grid') else 7,
                                 use_rope=rope, lepe=False).eval()
    attn.proj = nn.Identity()
    x = torch.randn(5, 6, 16)
    with torch.no_grad():
        expected = attn(x[None])[0]
        a = dense_attention(attn, x)
        v = attn.v(x).view(30, 2, 8)
    got = torch.einsum('hij,jhd->ihd', a, v).reshape(5, 6, 16)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.sum(-1), torch.ones(2, 30))
    if mode != 'full' and mode != 'decomposed':
        assert (a[:, ~visible_mask((5, 6), attn.group_size, mode)] == 0).all()


def _png_ok(path, min_w=200, min_h=150):
    img = Image.open(path)
    assert img.format == 'PNG' and img.width >= min_w and img.height >= min_h
    assert len(set(img.convert('L').getdata())) > 5  # not a blank picture


@pytest.mark.e2e
def test_tool_writes_decay_groups_and_rollout_pictures(tmp_path, shapes_root):
    run_tool('tools/visualize_attention.py', 'decay', '--grid', '9', '13', '--heads', '3',
             '--out', str(tmp_path / 'decay.png'))
    _png_ok(tmp_path / 'decay.png')
    for size in ('49', '50'):  # a square group size adds the 2D window / grid panels
        run_tool('tools/visualize_attention.py', 'groups', '--img-size', '224', '320',
                 '--group-size', size, '--out', str(tmp_path / f'groups{size}.png'))
        _png_ok(tmp_path / f'groups{size}.png')
    widths = [Image.open(tmp_path / f'groups{size}.png').width for size in ('49', '50')]
    assert widths[0] > 1.5 * widths[1]  # 5 panels vs 3
    cfg = osp.join(CONFIGS, 'demo', 'mask-rcnn_evt-demo_fpn_shapes.py')
    img = osp.join(shapes_root, 'images', 'validation', '000000.jpg')
    run_tool('tools/visualize_attention.py', 'rollout', cfg, img, '--out',
             str(tmp_path / 'rollout.png'))
    _png_ok(tmp_path / 'rollout.png', min_w=500)
    out = run_tool('tools/visualize_attention.py', 'groups', '--group-size', '0',
                   '--out', str(tmp_path / 'x.png'), check=False)
    assert out.returncode != 0 and '--group-size must be positive, got 0' in out.stdout
