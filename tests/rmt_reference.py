"""An independent, functional re-statement of the authors' RMT models and checkpoint layouts.

It reads the authors' state-dict layout directly (``patch_embed.proj.N``, ``layers.i.blocks.j.
retention.q_proj`` ...) and follows their published semantics step by step: k scaled by
``d ** -0.5`` before the rotary shift, rotary shift over the flattened index, decomposed
row-then-column retention in the chunk stages, Manhattan decay in the full stages, LePE on
v, the FFN's inner depth-wise residual, BN in stem/downsample, then proj -> BN -> Swish ->
average pool -> head (plus, token-labelled, ``0.5 * max over tokens of aux_head``), or the
detection / segmentation backbone's ``extra_norms`` (LayerNorm eps 1e-5) on each stage
output. Decay rates and rotary angles are read from the file's ``Relpos`` buffers, as the
authors' modules do once a checkpoint is loaded.

:func:`authors_state_dict` writes random files in the authors' layouts from their module
structure, and :func:`authors_head_keys` names the neck / head tensors of their detectors
and segmentors as mmdet 2.x / mmseg 0.x name them. Used to check that converted checkpoints
reproduce the authors' outputs; it shares no code with mmevt. Sources: ``classfication_
release/RMT.py``, ``classification_token_label_release/RMT.py``, ``detect/mmdet/models/
backbones/RMT.py`` and the ``detect/configs`` / ``segmentation/configs`` of
github.com/qhfan/RMT; mmdet 2.x's FPN, RPNHead, Shared2FC/ConvFC bbox heads, FCNMaskHead,
RetinaHead and mmseg 0.x's FPNHead, UPerHead, FCNHead.
"""
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F


def _bn(sd, p, x):
    return F.batch_norm(x, sd[p + '.running_mean'], sd[p + '.running_var'], sd[p + '.weight'],
                        sd[p + '.bias'], False, 0., 1e-5)


def _conv(sd, p, x, stride=1, groups=1):
    w = sd[p + '.weight']
    return F.conv2d(x, w, sd[p + '.bias'], stride, w.shape[-1] // 2, 1, groups)


def _dw_hwc(sd, p, x):
    return _conv(sd, p, x.permute(0, 3, 1, 2), groups=x.shape[-1]).permute(0, 2, 3, 1)


def _lin(sd, p, x):
    return F.linear(x, sd[p + '.weight'], sd[p + '.bias'])


def _ln(sd, p, x, eps=1e-6):
    return F.layer_norm(x, x.shape[-1:], sd[p + '.weight'], sd[p + '.bias'], eps)


def _rot(x):
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([-b, a], -1).flatten(-2)


def relpos_buffers(dim: int, heads: int, init_value: float, heads_range: float):
    """The authors' ``RetNetRelPos2d`` buffers: ``(decay (heads,), angle (dim/heads,))``."""
    decay = torch.log(1 - 2 ** (-init_value - heads_range * torch.arange(heads).float()
                                / heads))
    angle = (1.0 / 10000 ** torch.linspace(0, 1, dim // heads // 2)).repeat_interleave(2)
    return decay, angle


def rmt_reference_stages(sd, x, chunk_stages, prefix=''):
    """Each stage's output ``(B, H, W, C)`` (before downsampling), authors' semantics."""
    q_ = prefix + 'patch_embed.proj.'
    x = F.gelu(_bn(sd, q_ + '1', _conv(sd, q_ + '0', x, 2)))
    x = F.gelu(_bn(sd, q_ + '4', _conv(sd, q_ + '3', x)))
    x = F.gelu(_bn(sd, q_ + '7', _conv(sd, q_ + '6', x, 2)))
    x = _bn(sd, q_ + '10', _conv(sd, q_ + '9', x)).permute(0, 2, 3, 1)
    stage, outs = 0, []
    while f'{prefix}layers.{stage}.blocks.0.pos.conv.weight' in sd:
        b, h, w, c = x.shape
        decay = sd[f'{prefix}layers.{stage}.Relpos.decay']
        angle = sd[f'{prefix}layers.{stage}.Relpos.angle']
        n = decay.numel()
        d = c // n
        idx = torch.arange(h * w).float()
        sin = torch.sin(idx[:, None] * angle).reshape(h, w, d)
        cos = torch.cos(idx[:, None] * angle).reshape(h, w, d)
        j = 0
        while f'{prefix}layers.{stage}.blocks.{j}.pos.conv.weight' in sd:
            p = f'{prefix}layers.{stage}.blocks.{j}.'
            x = x + _dw_hwc(sd, p + 'pos.conv', x)
            y = _ln(sd, p + 'retention_layer_norm', x)
            q, k, v = (_lin(sd, p + f'retention.{t}_proj', y) for t in 'qkv')
            lepe = _dw_hwc(sd, p + 'retention.lepe.conv', v)
            k = k * d ** -0.5
            q = q.view(b, h, w, n, d).permute(0, 3, 1, 2, 4)
            k = k.view(b, h, w, n, d).permute(0, 3, 1, 2, 4)
            q = q * cos + _rot(q) * sin  # (b n h w d)
            k = k * cos + _rot(k) * sin
            if stage in chunk_stages:
                dw = (torch.arange(w)[:, None] - torch.arange(w)[None]).abs().float()
                dh = (torch.arange(h)[:, None] - torch.arange(h)[None]).abs().float()
                vv = v.view(b, h, w, n, d).permute(0, 1, 3, 2, 4)  # (b h n w d)
                a = q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2)
                vv = (a + decay[:, None, None] * dw).softmax(-1) @ vv
                a = q.permute(0, 3, 1, 2, 4) @ k.permute(0, 3, 1, 2, 4).transpose(-1, -2)
                out = (a + decay[:, None, None] * dh).softmax(-1) @ vv.permute(0, 3, 2, 1, 4)
                out = out.permute(0, 3, 1, 2, 4).reshape(b, h, w, c)  # (b w n h d) -> (b h w c)
            else:
                ii, jj = torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij')
                g = torch.stack([ii, jj], -1).reshape(-1, 2).float()
                dist = (g[:, None] - g[None]).abs().sum(-1)
                a = q.flatten(2, 3) @ k.flatten(2, 3).transpose(-1, -2)
                vv = v.view(b, h * w, n, d).transpose(1, 2)
                out = ((a + decay[:, None, None] * dist).softmax(-1) @ vv)
                out = out.transpose(1, 2).reshape(b, h, w, c)
            out = _lin(sd, p + 'retention.out_proj', out + lepe)
            if p + 'gamma_1' in sd:
                out = sd[p + 'gamma_1'] * out
            x = x + out
            f = F.gelu(_lin(sd, p + 'ffn.fc1', _ln(sd, p + 'final_layer_norm', x)))
            f = _lin(sd, p + 'ffn.fc2', f + _dw_hwc(sd, p + 'ffn.dwconv.conv', f))
            if p + 'gamma_2' in sd:
                f = sd[p + 'gamma_2'] * f
            x = x + f
            j += 1
        outs.append(x)
        if f'{prefix}layers.{stage}.downsample.reduction.weight' in sd:
            y = _conv(sd, f'{prefix}layers.{stage}.downsample.reduction', x.permute(0, 3, 1, 2),
                      2)
            x = _bn(sd, f'{prefix}layers.{stage}.downsample.norm', y).permute(0, 2, 3, 1)
        stage += 1
    return outs


def rmt_reference_logits(sd, x, chunk_stages):
    """Authors' RMT logits for image batch ``x`` from an authors'-layout state dict.

    With ``aux_head`` in ``sd`` (token-labelled), their evaluation output
    ``x_cls + 0.5 * max over tokens of aux_head(tokens)``.
    """
    tokens = rmt_reference_stages(sd, x, chunk_stages)[-1]
    y = _bn(sd, 'norm', _lin(sd, 'proj', tokens).permute(0, 3, 1, 2)).flatten(2)
    logits = _lin(sd, 'head', (y * torch.sigmoid(y)).mean(-1))
    if 'aux_head.weight' in sd:
        aux = _lin(sd, 'aux_head', tokens.flatten(1, 2))  # (B, H*W, classes)
        logits = logits + 0.5 * aux.max(1)[0]
    return logits


def rmt_reference_dense_features(sd, x, chunk_stages, out_indices=(0, 1, 2, 3)):
    """The authors' det/seg backbone outputs (``backbone.`` keys): NCHW, extra-normed."""
    stages = rmt_reference_stages(sd, x, chunk_stages, prefix='backbone.')
    return [_ln(sd, f'backbone.extra_norms.{i}', stages[i], eps=1e-5).permute(0, 3, 1, 2)
            for i in out_indices]


def authors_state_dict(embed_dims: Sequence[int], depths: Sequence[int],
                       num_heads: Sequence[int], mlp_ratios: Sequence[float],
                       layerscales: Sequence[bool], init_values: Sequence[float],
                       heads_ranges: Sequence[float], num_classes: int = 10,
                       projection: int = 1024, token_label: bool = False,
                       dense: bool = False, seed: int = 0, device=None
                       ) -> Dict[str, torch.Tensor]:
    """Random tensors under the authors' RMT names and shapes.

    ``dense=True``: their detection / segmentation backbone (``backbone.`` prefix, four
    ``extra_norms``, no classifier); otherwise the classifier (``proj``, ``norm``, ``head``
    and, ``token_label=True``, ``aux_head``). ``device='meta'`` gives shapes only.
    """
    gen = torch.Generator().manual_seed(seed)
    sd: Dict[str, torch.Tensor] = {}

    def rand(*shape, scale=0.1):
        if device == 'meta':
            return torch.empty(shape, device='meta')
        return torch.randn(shape, generator=gen) * scale

    def conv(p, cout, cin, k, bias=True):
        sd[p + '.weight'] = rand(cout, cin, k, k, scale=0.3)
        if bias:
            sd[p + '.bias'] = rand(cout)

    def lin(p, cout, cin):
        sd[p + '.weight'] = rand(cout, cin)
        sd[p + '.bias'] = rand(cout)

    def norm(p, c, bn=False):
        sd[p + '.weight'] = 1 + rand(c)
        sd[p + '.bias'] = rand(c)
        if bn:
            sd[p + '.running_mean'] = rand(c)
            sd[p + '.running_var'] = (0.5 + rand(c).abs() if device != 'meta'
                                      else torch.empty(c, device='meta'))
            sd[p + '.num_batches_tracked'] = torch.tensor(1000)

    c0 = embed_dims[0]
    for i, (cin, cout, k) in zip((0, 3, 6, 9), ((3, c0 // 2, 3), (c0 // 2, c0 // 2, 3),
                                               (c0 // 2, c0, 3), (c0, c0, 3))):
        conv(f'patch_embed.proj.{i}', cout, cin, k)
        norm(f'patch_embed.proj.{i + 1}', cout, bn=True)
    for i, (c, depth, heads) in enumerate(zip(embed_dims, depths, num_heads)):
        decay, angle = relpos_buffers(c, heads, init_values[i], heads_ranges[i])
        sd[f'layers.{i}.Relpos.angle'] = angle.to(device) if device else angle
        sd[f'layers.{i}.Relpos.decay'] = decay.to(device) if device else decay
        hidden = int(mlp_ratios[i] * c)
        for j in range(depth):
            p = f'layers.{i}.blocks.{j}.'
            norm(p + 'retention_layer_norm', c)
            for t in 'qkv':
                lin(p + f'retention.{t}_proj', c, c)
            conv(p + 'retention.lepe.conv', c, 1, 5)
            lin(p + 'retention.out_proj', c, c)
            norm(p + 'final_layer_norm', c)
            lin(p + 'ffn.fc1', hidden, c)
            lin(p + 'ffn.fc2', c, hidden)
            conv(p + 'ffn.dwconv.conv', hidden, 1, 3)
            conv(p + 'pos.conv', c, 1, 3)
            if layerscales[i]:
                sd[p + 'gamma_1'] = rand(1, 1, 1, c, scale=0.5)
                sd[p + 'gamma_2'] = rand(1, 1, 1, c, scale=0.5)
        if i + 1 < len(embed_dims):
            conv(f'layers.{i}.downsample.reduction', embed_dims[i + 1], c, 3)
            norm(f'layers.{i}.downsample.norm', embed_dims[i + 1], bn=True)
    if dense:
        for i, c in enumerate(embed_dims):
            norm(f'extra_norms.{i}', c)
        return {'backbone.' + k: v for k, v in sd.items()}
    lin('proj', projection, embed_dims[-1])
    norm('norm', projection, bn=True)
    lin('head', num_classes, projection)
    if token_label:
        lin('aux_head', num_classes, embed_dims[-1])
    return sd


def _conv_module(p: str, norm: bool) -> List[str]:
    """mmcv ``ConvModule``: ``conv`` (no bias under a norm) and, with SyncBN, ``bn``."""
    if not norm:
        return [p + '.conv.weight', p + '.conv.bias']
    return [p + '.conv.weight'] + [f'{p}.bn.{n}' for n in (
        'weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked')]


def _wb(p: str) -> List[str]:
    return [p + '.weight', p + '.bias']


def authors_head_keys(family: str, num_stages: int = 3) -> List[str]:
    """Neck / head tensor names of the authors' det / seg models as mmdet 2.x / mmseg 0.x
    name them (their configs: ``detect/configs/_base_/models/RMT_*.py``,
    ``segmentation/configs/_base_/models/RMT_{fpn,upper}.py``).

    ``family``: ``mask_rcnn`` (FPN 4 in / 5 out, RPNHead, Shared2FCBBoxHead, FCNMaskHead),
    ``cascade`` (three ConvFCBBoxHead 4 conv (SyncBN) + 1 fc, three FCNMaskHead),
    ``retinanet`` (FPN start_level=1 with extra convs on input, RetinaHead),
    ``sem_fpn`` (FPN 4/4, FPNHead with SyncBN), ``upernet`` (UPerHead, FCNHead aux).
    """
    keys: List[str] = []
    if family in ('mask_rcnn', 'cascade', 'sem_fpn'):
        for i in range(4):
            keys += _conv_module(f'neck.lateral_convs.{i}', False)
            keys += _conv_module(f'neck.fpn_convs.{i}', False)
    if family in ('mask_rcnn', 'cascade'):
        for n in ('rpn_conv', 'rpn_cls', 'rpn_reg'):
            keys += _wb(f'rpn_head.{n}')
    mask_convs = 4
    if family == 'mask_rcnn':
        keys += _wb('roi_head.bbox_head.shared_fcs.0') + _wb('roi_head.bbox_head.shared_fcs.1')
        keys += _wb('roi_head.bbox_head.fc_cls') + _wb('roi_head.bbox_head.fc_reg')
        mask_heads = ['roi_head.mask_head']
    elif family == 'cascade':
        mask_heads = []
        for s in range(num_stages):
            p = f'roi_head.bbox_head.{s}'
            for i in range(4):
                keys += _conv_module(f'{p}.shared_convs.{i}', True)
            keys += _wb(f'{p}.shared_fcs.0') + _wb(f'{p}.fc_cls') + _wb(f'{p}.fc_reg')
            mask_heads.append(f'roi_head.mask_head.{s}')
    else:
        mask_heads = []
    for p in mask_heads:
        for i in range(mask_convs):
            keys += _conv_module(f'{p}.convs.{i}', False)
        keys += _wb(f'{p}.upsample') + _wb(f'{p}.conv_logits')
    if family == 'retinanet':
        for i in range(3):  # inputs 1..3 (start_level=1)
            keys += _conv_module(f'neck.lateral_convs.{i}', False)
        for i in range(5):  # 3 outputs + 2 extra convs
            keys += _conv_module(f'neck.fpn_convs.{i}', False)
        for i in range(4):
            keys += _conv_module(f'bbox_head.cls_convs.{i}', False)
            keys += _conv_module(f'bbox_head.reg_convs.{i}', False)
        keys += _wb('bbox_head.retina_cls') + _wb('bbox_head.retina_reg')
    if family == 'sem_fpn':
        for i in range(4):  # stride 4 * 2**i: max(1, i) convs, each but the first level's
            for k in range(max(1, i)):  # followed by an Upsample (no tensors)
                keys += _conv_module(f'decode_head.scale_heads.{i}.{2 * k if i else 0}', True)
        keys += _wb('decode_head.conv_seg')
    if family == 'upernet':
        for i in range(4):
            keys += _conv_module(f'decode_head.psp_modules.{i}.1', True)
        keys += _conv_module('decode_head.bottleneck', True)
        for i in range(3):
            keys += _conv_module(f'decode_head.lateral_convs.{i}', True)
            keys += _conv_module(f'decode_head.fpn_convs.{i}', True)
        keys += _conv_module('decode_head.fpn_bottleneck', True) + _wb('decode_head.conv_seg')
        keys += _conv_module('auxiliary_head.convs.0', True) + _wb('auxiliary_head.conv_seg')
    if not keys:
        raise ValueError(f'unknown family {family!r}')
    return keys


def authors_dense_checkpoint(backbone: Dict[str, torch.Tensor], head_keys: List[str],
                             shapes: Dict[str, torch.Size], seed: int = 1,
                             meta: Optional[dict] = None) -> dict:
    """An mmdet 2.x / mmseg 0.x checkpoint: ``meta``, ``state_dict`` (backbone + heads with
    random values of ``shapes[name]``), ``optimizer``."""
    gen = torch.Generator().manual_seed(seed)
    state = dict(backbone)
    for k in head_keys:
        if k.endswith('num_batches_tracked'):
            state[k] = torch.tensor(10)
        elif k.endswith('running_var'):
            state[k] = 0.5 + torch.rand(shapes[k], generator=gen)
        else:
            state[k] = torch.randn(shapes[k], generator=gen) * 0.05
    return dict(meta=meta or dict(mmdet_version='2.11.0', CLASSES=('a', 'b', 'c'), epoch=12,
                                  config='model = dict(...)', hook_msgs=dict(last_ckpt='x')),
                state_dict=state,
                optimizer=dict(state={}, param_groups=[dict(lr=1e-4, params=[0, 1])]))
