"""Attention pictures: dense attention matrices are exact; the tool writes PNGs, on a real
photograph by default."""
import importlib.util
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from helpers import CONFIGS, REPO, run_tool
from mmevt.analysis import dense_attention, visible_mask
from mmevt.models.layers import SpatialDecayAttention


_CASES = [('full', 'euclidean', False), ('group', 'euclidean', False),
          ('dilate', 'manhattan', True), ('window', 'euclidean', False), ('grid', 'none', False),
          ('decomposed', 'manhattan', True)]


def _mixer(mode, decay, rope, cls=SpatialDecayAttention):
    torch.manual_seed(0)
    attn = cls(16, 2, mode=mode, decay=decay, group_size=4 if mode in ('window', 'grid') else 7,
               use_rope=rope, lepe=False).eval()
    attn.proj = nn.Identity()
    return attn


def _check_reproduces(attn, x):
    """``dense_attention`` applied to the values is the module's output; returns it."""
    with torch.no_grad():
        expected = attn(x[None])[0]
        a = dense_attention(attn, x)
        v = attn.v(x).view(30, 2, 8)
    got = torch.einsum('hij,jhd->ihd', a, v).reshape(5, 6, 16)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.sum(-1), torch.ones(2, 30))
    return a


@pytest.mark.parametrize('mode,decay,rope', _CASES)
def test_dense_attention_reproduces_the_module(mode, decay, rope):
    attn = _mixer(mode, decay, rope)
    x = torch.randn(5, 6, 16)
    a = _check_reproduces(attn, x)
    if mode != 'full' and mode != 'decomposed':
        assert (a[:, ~visible_mask((5, 6), attn.group_size, mode)] == 0).all()


class _QKNormAttention(SpatialDecayAttention):
    """A new q / k option as a contributor adds it: in the module's one q / k step."""

    def head_queries_keys(self, q, k, hw):
        q, k = super().head_queries_keys(q, k, hw)
        return 3 * F.normalize(q, dim=-1), 3 * F.normalize(k, dim=-1)


@pytest.mark.parametrize('mode,decay,rope', _CASES)
def test_dense_attention_comes_from_the_module_so_a_qk_option_shows(mode, decay, rope):
    x = torch.randn(5, 6, 16, generator=torch.Generator().manual_seed(1))
    plain = dense_attention(_mixer(mode, decay, rope), x)
    normed = _check_reproduces(_mixer(mode, decay, rope, _QKNormAttention), x)
    assert (normed - plain).abs().max() > 1e-3  # same weights: the option alone differs


def _colours(path) -> int:
    return len(np.unique(np.asarray(Image.open(path).convert('RGB')).reshape(-1, 3), axis=0))


def _png_ok(path, min_w=200, min_h=150):
    img = Image.open(path)
    assert img.format == 'PNG' and img.width >= min_w and img.height >= min_h
    assert _colours(path) > 5  # not a blank picture


def _tool(path=osp.join('tools', 'visualization', 'visualize_attention.py')):
    """tools/visualization/visualize_attention.py as a module (its main() runs in this
    process)."""
    spec = importlib.util.spec_from_file_location('visualize_attention', osp.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fit_image_crops_to_the_aspect_ratio_without_distortion():
    from mmevt.analysis import attention_maps
    from mmevt.utils.sample_images import fit_image, sample_photo_path
    # where they were before mmevt.utils.sample_images (an alias for one release)
    assert (attention_maps.fit_image, attention_maps.sample_photo_path) == (fit_image,
                                                                            sample_photo_path)
    img = Image.new('RGB', (200, 100), (0, 255, 0))  # wide: the sides are cropped
    img.paste((255, 0, 0), (0, 0, 50, 100))
    img.paste((0, 0, 255), (150, 0, 200, 100))
    out = fit_image(img, 60, 60)
    assert out.size == (60, 60)
    assert (np.asarray(out) == [0, 255, 0]).all()
    tall = fit_image(Image.new('L', (50, 300)), 40, 80)  # tall: top and bottom cropped
    assert tall.size == (80, 40) and tall.mode == 'RGB'
    assert Image.open(sample_photo_path()).size == (512, 600)  # matplotlib's Grace Hopper


def test_decay_and_group_pictures_on_the_photo(tmp_path, capsys):
    tool = _tool()
    # on matplotlib's photo by default, on a plain grid with --image none
    tool.main(['decay', '--grid', '9', '13', '--heads', '3', '--out', str(tmp_path / 'd.png')])
    tool.main(['decay', '--grid', '9', '13', '--heads', '3', '--image', 'none',
               '--out', str(tmp_path / 'plain.png')])
    _png_ok(tmp_path / 'd.png')
    _png_ok(tmp_path / 'plain.png')
    assert _colours(tmp_path / 'd.png') > 4 * _colours(tmp_path / 'plain.png')  # the photo
    for size in ('49', '50'):  # a square group size adds the 2D window / grid panels
        tool.main(['groups', '--img-size', '224', '320', '--group-size', size,
                   '--out', str(tmp_path / f'groups{size}.png')])
        _png_ok(tmp_path / f'groups{size}.png')
    widths = [Image.open(tmp_path / f'groups{size}.png').width for size in ('49', '50')]
    assert widths[0] > 1.5 * widths[1]  # 5 panels vs 3
    # an existing picture is kept unless --overwrite
    before = (tmp_path / 'd.png').read_bytes()
    with pytest.raises(SystemExit, match='exists; pass --overwrite'):
        tool.main(['decay', '--heads', '2', '--out', str(tmp_path / 'd.png')])
    assert (tmp_path / 'd.png').read_bytes() == before
    tool.main(['decay', '--heads', '2', '--overwrite', '--out', str(tmp_path / 'd.png')])
    assert (tmp_path / 'd.png').read_bytes() != before
    capsys.readouterr()
    for args, message in ((['groups', '--group-size', '0'], '--group-size must be positive'),
                          (['decay', '--query', '3', '20'], 'outside the 14x14 grid'),
                          (['groups', '--stride', '16', '--query', '14', '0'],
                           'outside the 14x14 token grid')):
        with pytest.raises(SystemExit):
            tool.main(args + ['--out', str(tmp_path / 'x.png')])
        assert message in capsys.readouterr().err
    assert not osp.exists(tmp_path / 'x.png')


@pytest.mark.e2e
def test_tool_draws_the_rollout_of_a_model(tmp_path, shapes_root):
    cfg = osp.join(CONFIGS, 'demo', 'mask-rcnn_evt-demo_fpn_shapes.py')
    img = osp.join(shapes_root, 'images', 'validation', '000000.jpg')
    run_tool('tools/visualization/visualize_attention.py', 'rollout', cfg, img, '--out',
             str(tmp_path / 'rollout.png'))
    _png_ok(tmp_path / 'rollout.png', min_w=500)
    # no IMAGE: the photo (600 x 512, so fitted to 224 x 224 for the dense matrices)
    log = run_tool('tools/visualization/visualize_attention.py', 'rollout', cfg, '--out',
                   str(tmp_path / 'rollout_photo.png'))
    assert 'grace_hopper.jpg at 224x224' in log
    _png_ok(tmp_path / 'rollout_photo.png', min_w=500)
