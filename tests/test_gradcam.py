"""Grad-CAM with mmpretrain's own vis_cam.py through tools/visualization/vis_cam.py: the
layout of EVT's channels-last layers, the map it gives, and the tool end to end."""
import os.path as osp
from argparse import Namespace
from functools import partial

import numpy as np
import pytest
import torch

from helpers import CONFIGS, load_tool, run_tool, write_config

TOOL = 'tools/visualization/vis_cam.py'
SIZE = 64  # the tiny test pipeline's crop
TINY_CLS = f'''
_base_ = {osp.join(CONFIGS, 'cls', 'evt', 'evt-t_8xb128_in1k.py')!r}
data_preprocessor = dict(num_classes=6)
model = dict(backbone=dict(arch='evt-test'), neck=dict(in_channels=128, hidden_channels=64),
             head=dict(num_classes=6, in_channels=64))
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale={SIZE}, edge='short', backend='pillow'),
    dict(type='CenterCrop', crop_size={SIZE}),
    dict(type='PackInputs'),
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
'''


@pytest.fixture(scope='module')
def classifier(tmp_path_factory):
    """(config path, checkpoint path) of a randomly initialised evt-test classifier."""
    import mmevt  # noqa: F401
    from mmpretrain import get_model
    tmp = tmp_path_factory.mktemp('cam')
    cfg = write_config(tmp / 'tiny_cls.py', TINY_CLS)
    torch.manual_seed(0)
    model = get_model(cfg)
    ckpt = str(tmp / 'random.pth')
    torch.save({'state_dict': model.state_dict()}, ckpt)
    return cfg, ckpt


def test_channels_last_targets_give_the_right_activations_and_gradients(classifier):
    from mmpretrain import get_model
    from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
    tool = load_tool(TOOL)
    vis_cam = tool.patch(tool.load_vis_cam())
    model = get_model(classifier[0], classifier[1])
    stage = model.backbone.stages[2]
    assert tool.channels_last_layers(model, [stage, model.backbone.stem]) == {id(stage)}

    cam = vis_cam.init_cam('GradCAM', model, [stage], False,
                           partial(vis_cam.reshape_transform, model=model,
                                   args=Namespace(vit_like=False, num_extra_tokens=None)))
    torch.manual_seed(1)
    x = torch.randn(1, 3, SIZE, SIZE)
    grey = cam(x, [ClassifierOutputTarget(2)])
    assert grey.shape == (1, SIZE, SIZE) and grey.std() > 0.05
    acts, = cam.activations_and_grads.activations
    grads, = cam.activations_and_grads.gradients
    cam.activations_and_grads.release()

    # what Grad-CAM used is the stage's (B, H, W, C) output and its gradient, as NCHW
    seen = {}
    hook = stage.register_forward_hook(
        lambda m, i, o: seen.update(out=o) or o.retain_grad())
    model(x)[0, 2].backward()
    hook.remove()
    out = seen['out']
    assert out.shape[1:] == (SIZE // 16, SIZE // 16, 64)  # channels-last at stride 16
    torch.testing.assert_close(acts, out.detach().permute(0, 3, 1, 2))
    torch.testing.assert_close(grads, out.grad.permute(0, 3, 1, 2))


@pytest.mark.e2e
def test_vis_cam_draws_maps_on_the_photo(classifier, tmp_path):
    from PIL import Image

    from mmevt.utils.sample_images import sample_photo_path
    cfg, ckpt = classifier
    pictures = []
    for layer in ('backbone.stages.2', 'backbone.stages.3'):
        out = tmp_path / f'{layer}.png'
        run_tool(TOOL, sample_photo_path(), cfg, ckpt, '--target-layers', layer,
                 '--target-category', '2', '--save-path', str(out))
        pictures.append(np.asarray(Image.open(out).convert('RGB'), dtype=np.float32))
    assert all(p.shape == (SIZE, SIZE, 3) for p in pictures)
    # grad-cam rescales every map to [0, 1] (a constant map becomes 0), so pictures of two
    # layers differ only where a map varies
    assert np.abs(pictures[0] - pictures[1]).mean() > 5


def test_a_model_the_probe_cannot_run_keeps_vis_cams_reading():
    class OneSize(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x):
            if x.shape[-1] != 224:
                raise ValueError(f'only 224 wide, got {x.shape[-1]}')
            return self.conv(x)

    model = OneSize()
    with pytest.warns(UserWarning, match='layout probe .* failed .*only 224 wide'):
        assert load_tool(TOOL).channels_last_layers(model, [model.conv]) == set()


def test_an_existing_picture_is_not_overwritten(classifier, tmp_path, monkeypatch):
    tool = load_tool(TOOL)
    vis_cam = tool.patch(tool.load_vis_cam())
    out = tmp_path / 'cam.png'
    out.write_bytes(b'mine')
    monkeypatch.setattr('sys.argv', ['vis_cam.py', 'img.jpg', *classifier, '--save-path',
                                     str(out)])
    with pytest.raises(ValueError, match='--save-path .*cam.png.* exists'):
        vis_cam.parse_args()
    assert out.read_bytes() == b'mine'
