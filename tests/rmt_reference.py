"""An independent, functional re-statement of the authors' RMT classifier forward.

It reads the authors' state-dict layout directly (``patch_embed.proj.N``, ``layers.i.blocks.j.
retention.q_proj`` ...) and follows their published semantics step by step: k scaled by
``d ** -0.5`` before the rotary shift, rotary shift over the flattened index, decomposed
row-then-column retention in the chunk stages, Manhattan decay in the full stages, LePE on
v, the FFN's inner depth-wise residual, BN in stem/downsample, then proj -> BN -> Swish ->
average pool -> head. Used to check that converted checkpoints reproduce the authors'
logits; it shares no code with mmevt.
"""
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


def _ln(sd, p, x):
    return F.layer_norm(x, x.shape[-1:], sd[p + '.weight'], sd[p + '.bias'], 1e-6)


def _rot(x):
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([-b, a], -1).flatten(-2)


def rmt_reference_logits(sd, x, num_heads, init_values, heads_ranges, chunk_stages):
    """Authors' RMT logits for image batch ``x`` from an authors'-layout state dict."""
    x = F.gelu(_bn(sd, 'patch_embed.proj.1', _conv(sd, 'patch_embed.proj.0', x, 2)))
    x = F.gelu(_bn(sd, 'patch_embed.proj.4', _conv(sd, 'patch_embed.proj.3', x)))
    x = F.gelu(_bn(sd, 'patch_embed.proj.7', _conv(sd, 'patch_embed.proj.6', x, 2)))
    x = _bn(sd, 'patch_embed.proj.10', _conv(sd, 'patch_embed.proj.9', x)).permute(0, 2, 3, 1)
    stage = 0
    while f'layers.{stage}.blocks.0.pos.conv.weight' in sd:
        b, h, w, c = x.shape
        n = num_heads[stage]
        d = c // n
        decay = torch.log(1 - 2 ** (-init_values[stage] -
                                    heads_ranges[stage] * torch.arange(n).float() / n))
        angle = (1.0 / 10000 ** torch.linspace(0, 1, d // 2)).repeat_interleave(2)
        idx = torch.arange(h * w).float()
        sin = torch.sin(idx[:, None] * angle).reshape(h, w, d)
        cos = torch.cos(idx[:, None] * angle).reshape(h, w, d)
        j = 0
        while f'layers.{stage}.blocks.{j}.pos.conv.weight' in sd:
            p = f'layers.{stage}.blocks.{j}.'
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
        if f'layers.{stage}.downsample.reduction.weight' in sd:
            y = _conv(sd, f'layers.{stage}.downsample.reduction', x.permute(0, 3, 1, 2), 2)
            x = _bn(sd, f'layers.{stage}.downsample.norm', y).permute(0, 2, 3, 1)
        stage += 1
    x = _bn(sd, 'norm', _lin(sd, 'proj', x).permute(0, 3, 1, 2)).flatten(2)
    x = (x * torch.sigmoid(x)).mean(-1)
    return _lin(sd, 'head', x)
