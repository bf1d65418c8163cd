"""mmaction2 (video recognition): what mmevt knows and does for it; its recognizers in the
swap (which can be swapped), the smoke test's clips and the FLOP counter's forward.

One toolkit, three names: the scope and import name ``mmaction``, the distribution
``mmaction2``, and the folders ``configs/action`` / ``docs/action.md``.

A 2D recognizer (``Recognizer2D``: TSN, TRN, C2D) runs one 2D backbone on every frame: a
clip ``(N, segments, 3, H, W)`` is reshaped to ``(N * segments, 3, H, W)``, and its
``cls_head`` (TSNHead, TRNHead) reads the last map of each frame and combines the segments.
EVT takes the backbone's place, written ``type='mmpretrain.EVT'`` (:data:`BACKBONE_TYPE`:
Recognizer2D unpacks a backbone's tuple of maps for ``'mmpretrain.'`` backbones only).

Refused, with the reason (:func:`refuse_unswappable`): backbones that mix frames inside
(TSM's temporal shift, TIN's interlace, TANet's temporal module: their ``num_segments``),
whose method a 2D EVT would silently drop; backbones of optical flow (not 3-channel RGB);
torchvision / timm backbones, whose outputs Recognizer2D pools itself; and the recognizers
of 3D clips, audio and skeletons (:data:`OTHER_RECOGNIZERS`).
"""
import inspect
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .base import Toolkit
from .build import toolkit_scope
from .config_values import training_pipeline

__all__ = ['BACKBONE_TYPE', 'BACKBONE_TYPE_WHY', 'DEFAULT_SEGMENTS', 'OTHER_RECOGNIZERS',
           'TEMPORAL_BACKBONES', 'MMAction', 'action_batch', 'clip_segments',
           'refuse_unswappable']

# Frames a clip of a 2D recognizer where its pipeline samples none: TSN's 1x1x3.
DEFAULT_SEGMENTS = 3

BACKBONE_TYPE = 'mmpretrain.EVT'
BACKBONE_TYPE_WHY = ("the 'mmpretrain.' prefix: mmaction2's Recognizer2D unpacks the tuple "
                     "of maps an OpenMMLab backbone returns only for 'mmpretrain.' / "
                     "'mmcls.' backbones (EVT is registered in mmpretrain's MODELS); with "
                     "type='EVT' the head would get a tuple")
# mmaction2's 2D backbones that mix features across the frames of a clip inside the network;
# any other backbone taking ``num_segments`` is refused too (:func:`_temporal_method`).
TEMPORAL_BACKBONES = {
    'ResNetTSM': "TSM's temporal shift",
    'MobileNetV2TSM': "TSM's temporal shift",
    'MobileOneTSM': "TSM's temporal shift",
    'ResNetTIN': "TIN's temporal interlace",
    'TANet': "TANet's temporal adaptive module",
}
# Why mmaction2's other recognizers are no 2D swap.
OTHER_RECOGNIZERS = {
    'Recognizer3D': 'it takes 3D clips (N, clips, C, T, H, W) through a 3D backbone that '
                    'convolves or attends over time as well as space (I3D, SlowFast, '
                    'SlowOnly, X3D, C3D, CSN, R(2+1)D, Video Swin, TimeSformer, MViT, '
                    'UniFormer, VideoMAE); EVT is a 2D backbone: this is not a 2D swap',
    'MMRecognizer3D': 'it takes multi-modal 3D clips through 3D backbones; EVT is a 2D '
                      'backbone: this is not a 2D swap',
    'RecognizerOmni': 'it trains one 3D backbone on images and 3D clips together '
                      '(OmniSource); EVT is a 2D backbone: this is not a 2D swap',
    'RecognizerAudio': 'it takes audio spectrograms, not RGB frames',
    'RecognizerGCN': 'it takes skeleton keypoint sequences (N, M, T, V, C) through a graph '
                     'convolution network, not RGB frames',
}
# A TSN config to swap instead of a refused 2D one (named in the errors).
TSN_CONFIG = ('mmaction::recognition/tsn/'
              'tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_kinetics400-rgb.py')


def _takes_num_segments(cls: Any) -> bool:
    """Whether ``cls`` or a base of it takes ``num_segments``: a backbone that mixes the
    frames of a clip (it reshapes its batch into clips of that many frames)."""
    for klass in inspect.getmro(cls):
        init = klass.__dict__.get('__init__')
        if init is not None and 'num_segments' in inspect.signature(init).parameters:
            return True
    return False


def _temporal_method(name: str, models: Any) -> Optional[str]:
    """What a temporal 2D backbone ``name`` does over time (None for a per-frame one)."""
    if name in TEMPORAL_BACKBONES:
        return TEMPORAL_BACKBONES[name]
    cls = models.get(name)
    if inspect.isclass(cls) and _takes_num_segments(cls):
        return f'a temporal module of {name} (it takes num_segments)'
    return None


def refuse_unswappable(model_cfg: Dict[str, Any], src: str) -> None:
    """Refuse an mmaction2 model EVT cannot replace the backbone of, saying why.

    Args:
        model_cfg (dict): SRC's ``model``.
        src (str): SRC, for the message.

    Raises:
        ValueError: ``model_cfg`` is not a 2D recognizer (:data:`OTHER_RECOGNIZERS`: 3D,
            audio, skeleton ones), or its backbone mixes frames in time (TSM), takes other
            than 3-channel frames (optical flow), or is a torchvision / timm model.
    """
    kind = str(model_cfg.get('type', '?'))
    backbone = model_cfg.get('backbone') or {}
    name = str(backbone.get('type', '?'))
    with toolkit_scope('mmaction') as models:
        from mmaction.models import Recognizer2D
        cls = models.get(kind)
        if kind in OTHER_RECOGNIZERS or not (inspect.isclass(cls)
                                             and issubclass(cls, Recognizer2D)):
            why = OTHER_RECOGNIZERS.get(kind, "only mmaction2's 2D recognizers "
                                        '(Recognizer2D: TSN, TRN) run a 2D backbone per frame')
            raise ValueError(f'{src}: {kind} (backbone {name}) cannot be swapped: {why}')
        prefix = name.split('.')[0] if '.' in name else None
        if prefix in ('torchvision', 'timm'):
            raise ValueError(f'{src}: {kind} pools the output of its {prefix} backbone '
                             f'{name} itself; the swap measures OpenMMLab backbones (maps '
                             f'of known strides): swap an OpenMMLab one, e.g. {TSN_CONFIG}')
        method = _temporal_method(name, models)
    if method is not None:
        raise ValueError(f'{src}: {kind} with backbone {name} cannot be swapped: {name} '
                         f'mixes the frames of a clip inside the backbone ({method}); EVT is '
                         'a 2D backbone without a temporal shift, so the swap would silently '
                         f'drop that method (TSM / TIN / TANet would train as TSN): swap a '
                         f'TSN config instead, e.g. {TSN_CONFIG}')
    channels = backbone.get('in_channels', 3)
    if channels != 3:
        raise ValueError(f'{src}: {kind} with backbone {name} cannot be swapped: {name} '
                         f"takes {channels}-channel frames (e.g. stacked optical flow); EVT's "
                         'stem takes 3-channel RGB frames')


def action_batch(size: int, segments: int, batch: int = 2, classes: int = 3) -> dict:
    """A generated batch as mmaction2's dataloader gives a 2D recognizer: ``batch`` clips
    of ``segments`` uint8 RGB frames each (``PackActionInputs`` of ``FormatShape('NCHW')``)
    with a label each.

    Args:
        size (int): the frames' side.
        segments (int): frames a clip (:func:`clip_segments`).
        batch (int): clips. Defaults to 2.
        classes (int): labels are drawn below this (at most the head's classes). Defaults
            to 3.

    Returns:
        dict: ``inputs`` (``batch`` uint8 tensors of shape ``(segments, 3, size, size)``,
        stacked by the data preprocessor to ``(batch, segments, 3, size, size)``) and
        ``data_samples`` (``ActionDataSample`` with ``gt_label``).
    """
    import torch
    from mmaction.structures import ActionDataSample
    gen = torch.Generator().manual_seed(0)
    inputs: List[Any] = [torch.randint(0, 256, (segments, 3, size, size), generator=gen,
                                       dtype=torch.uint8) for _ in range(batch)]
    samples = [ActionDataSample(metainfo=dict(img_shape=(size, size))).set_gt_label(
        i % classes) for i in range(batch)]
    return dict(inputs=inputs, data_samples=samples)


def clip_segments(cfg) -> int:
    """Frames a clip of an mmaction2 2D recognizer has: ``num_clips * clip_len`` of the
    training pipeline's ``SampleFrames`` (or ``DenseSampleFrames`` ...), e.g. 3 for TSN
    1x1x3, 8 for TSN 1x1x8; :data:`DEFAULT_SEGMENTS` where the pipeline samples none.

    Args:
        cfg (mmengine.Config): an mmaction2 config.

    Returns:
        int: the ``segments`` of the recognizer's inputs ``(N, segments, 3, H, W)``.
    """
    for step in training_pipeline(cfg):
        if isinstance(step, dict) and str(step.get('type', '')).split('.')[-1].endswith(
                'SampleFrames'):
            return int(step.get('num_clips', 1)) * int(step.get('clip_len', 1))
    return DEFAULT_SEGMENTS


def action_forward(model, features_only: bool) -> Callable[[Any], Any]:
    """The forward of an mmaction2 2D recognizer the FLOP counter traces on a clip
    ``(1, segments, 3, H, W)``: ``mode='tensor'`` up to the head's logits ``(1, classes)``,
    or ``extract_feat``'s features (as mmaction2's ``get_flops.py``; its dict of head
    arguments dropped, the trace takes tensors).

    Raises:
        ValueError: ``model`` is not a 2D recognizer (3D, audio, skeleton inputs differ).
    """
    from mmaction.models import Recognizer2D
    if not isinstance(model, Recognizer2D):
        raise ValueError(f'{type(model).__name__}: only mmaction2\'s 2D recognizers '
                         '(Recognizer2D: TSN), which take (1, segments, 3, H, W) clips, are '
                         'counted; use mmaction2\'s own get_flops.py with a 5-d --shape')
    call, extract = model.forward, model.extract_feat
    if features_only:
        return lambda inputs: extract(inputs)[0]
    return lambda inputs: call(inputs, None, mode='tensor', stage='head')


class MMAction(Toolkit):
    """mmaction2's 2D recognizers (TSN). The FLOP shape and the smoke test's frames are
    ImageNet's 224 x 224 a frame, as its TSN / TSM recipes crop; a clip has
    :func:`clip_segments` frames."""
    scope = 'mmaction'
    package = 'mmaction2'
    configs = 'action'
    docs = 'action'
    requirements = dict(upstream='requirements/action-upstream.txt')  # no fork of it
    demo_data = 'generate_rawframes'
    probe_size = 224
    flops_shape = (224, 224)
    smoke_size = 224
    keeps_query_recipe = False
    rgb_setting = ('to_rgb', False)  # its pipelines decode frames as RGB already

    def refuse_unswappable(self, model_cfg: Mapping, src: str) -> None:
        refuse_unswappable(model_cfg, src)

    def swap_backbone_type(self) -> Dict[str, Tuple[Any, Optional[str]]]:
        # Recognizer2D builds a 'mmpretrain.' backbone from mmpretrain's registry: no _scope_
        return dict(type=(BACKBONE_TYPE, BACKBONE_TYPE_WHY))

    def recipe_family(self, model_cfg: Mapping) -> Optional[str]:
        return 'action'  # its 2D recognizers; the others are refused

    def clip_frames(self, cfg) -> Optional[int]:
        return clip_segments(cfg)

    def make_batch(self, cfg, model_cfg: Mapping, size: int, batch: int,
                   classes: int) -> dict:
        return action_batch(size, clip_segments(cfg), batch, classes)

    def flops_forward(self, model, hw: Tuple[int, int],
                      features_only: bool) -> Callable[[Any], Any]:
        return action_forward(model, features_only)


TOOLKIT = MMAction()
