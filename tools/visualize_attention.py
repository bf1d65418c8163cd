#!/usr/bin/env python
"""Pictures of EVT's spatial prior and attention.

    # per-head decay of one query: Euclidean (EVT) vs Manhattan (RMT)   (paper Fig. 7 idea)
    python tools/visualize_attention.py decay --grid 14 14 --heads 4 --out decay.png
    # which tokens one query sees under EuSA-g, EuSA-d and full EuSA at an input size
    python tools/visualize_attention.py groups --img-size 224 320 --group-size 49 --out g.png
    # attention rollout per stage of a trained model on an image      (paper Fig. 8 idea)
    python tools/visualize_attention.py rollout CONFIG IMAGE --checkpoint CKPT --out r.png

Every picture is a PNG; nothing is shown on screen.
"""
import argparse
import os
import os.path as osp

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def _save(fig, out):
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches='tight')
    plt.close(fig)
    print(f'wrote {out}')


def plot_decay(grid, heads, init_value, heads_range, query, out):
    from mmevt.ops import decay_log_rates, grid_coords, pairwise_distance
    h, w = grid
    qr, qc = query if query else (h // 2, w // 2)
    lg = decay_log_rates(heads, init_value, heads_range)
    p = grid_coords((h, w))
    q = p[qr * w + qc][None]
    fig, axes = plt.subplots(2, heads, figsize=(2.2 * heads, 4.6), squeeze=False)
    for row, kind in enumerate(('euclidean', 'manhattan')):
        dist = pairwise_distance(q, p, kind)[0].view(h, w)
        for hd in range(heads):
            ax = axes[row][hd]
            ax.imshow((lg[hd] * dist).exp().numpy(), vmin=0, vmax=1, cmap='viridis')
            ax.plot(qc, qr, 'r+')
            ax.set_title(f'{kind[:3]}. head {hd}\ngamma={lg[hd].exp():.3f}', fontsize=8)
            ax.axis('off')
    fig.suptitle(f'decay gamma^dist from query ({qr}, {qc}) on a {h}x{w} grid')
    _save(fig, out)


def plot_groups(img_size, group_size, stride, query, out):
    from mmevt.analysis import visible_mask
    from mmevt.ops.decay import square_side
    h, w = (-(-img_size[0] // stride), -(-img_size[1] // stride))
    qr, qc = query if query else (h // 2, w // 2)
    qi = qr * w + qc
    panels = [('group', 'EuSA-g (1D groups)'), ('dilate', 'EuSA-d (dilated)')]
    side = square_side(group_size)
    if side:  # the 2D counterparts of the ablation need square groups
        panels += [('window', f'2D windows {side}x{side}'), ('grid', f'2D grid {side}x{side}')]
    panels.append(('full', 'full EuSA'))
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4))
    for ax, (mode, name) in zip(axes, panels):
        seen = visible_mask((h, w), group_size, mode)[qi].view(h, w).numpy()
        ax.imshow(seen, cmap='Greys', vmin=0, vmax=1.4)
        ax.plot(qc, qr, 'r+', markersize=10)
        ax.set_title(f'{name}: {int(seen.sum())} tokens', fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])  # keep the frame: the grid's extent matters here
    fig.suptitle(f'input {img_size[0]}x{img_size[1]}, stride {stride} grid {h}x{w}, '
                 f'group size {group_size} tokens')
    _save(fig, out)


def plot_rollout(config, checkpoint, image, query, out, device='cpu'):
    import importlib

    import mmevt  # noqa: F401
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from PIL import Image

    from mmevt.analysis import attention_rollout
    cfg = Config.fromfile(config)
    scope = cfg.default_scope
    with DefaultScope.overwrite_default_scope(scope):
        backbone = importlib.import_module(f'{scope}.registry').MODELS.build(
            dict(cfg.model.backbone, init_cfg=None))
    if checkpoint:
        _load_backbone(backbone, checkpoint)
    pil = Image.open(image).convert('RGB')
    arr = np.asarray(pil).astype(np.float32)
    mean, std = np.array([123.675, 116.28, 103.53]), np.array([58.395, 57.12, 57.375])
    x = torch.from_numpy((arr - mean) / std).permute(2, 0, 1)[None].float().to(device)
    maps = attention_rollout(backbone.to(device), x)
    fig, axes = plt.subplots(1, len(maps) + 1, figsize=(3.2 * (len(maps) + 1), 3.4))
    axes[0].imshow(pil)
    axes[0].set_title('image')
    axes[0].axis('off')
    H, W = arr.shape[:2]
    qy, qx = query if query else (H // 2, W // 2)
    axes[0].plot(qx, qy, 'r+', markersize=12)
    for i, (ax, m) in enumerate(zip(axes[1:], maps)):
        h, w = m['hw']
        qi = min(int(qy * h / H), h - 1) * w + min(int(qx * w / W), w - 1)
        heat = m['rollout'][qi].view(h, w).numpy()
        heat = np.asarray(Image.fromarray(heat / max(heat.max(), 1e-12)).resize((W, H)))
        ax.imshow(pil)
        ax.imshow(heat, cmap='jet', alpha=0.5)
        ax.set_title(f'stage {i + 1} ({h}x{w}) rollout', fontsize=9)
        ax.axis('off')
    _save(fig, out)


def _load_backbone(backbone, checkpoint):
    """Backbone weights from a full-model or a backbone-only checkpoint."""
    state = torch.load(checkpoint, map_location='cpu')
    state = state.get('state_dict', state)
    prefix = 'backbone.' if any(k.startswith('backbone.') for k in state) else None
    try:
        backbone.load_pretrained(checkpoint, prefix)
    except ValueError as err:
        raise SystemExit(f'{checkpoint}: backbone keys do not match the config: {err}')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('decay', help='per-head decay maps, Euclidean vs Manhattan')
    p.add_argument('--grid', type=int, nargs=2, default=[14, 14], metavar=('H', 'W'))
    p.add_argument('--heads', type=int, default=4)
    p.add_argument('--init-value', type=float, default=2.)
    p.add_argument('--heads-range', type=float, default=4.)
    p.add_argument('--query', type=int, nargs=2, metavar=('ROW', 'COL'))
    p.add_argument('--out', default='work_dirs/vis/decay.png')
    p = sub.add_parser('groups', help='tokens one query sees under g / d / 2D window / '
                       '2D grid / full')
    p.add_argument('--img-size', type=int, nargs=2, default=[224, 224], metavar=('H', 'W'))
    p.add_argument('--group-size', type=int, default=49)
    p.add_argument('--stride', type=int, default=4, help='stage stride: 4, 8, 16 or 32')
    p.add_argument('--query', type=int, nargs=2, metavar=('ROW', 'COL'))
    p.add_argument('--out', default='work_dirs/vis/groups.png')
    p = sub.add_parser('rollout', help='attention rollout per stage on an image')
    p.add_argument('config')
    p.add_argument('image')
    p.add_argument('--checkpoint', help='full-model or backbone checkpoint; default: random')
    p.add_argument('--query', type=int, nargs=2, metavar=('Y', 'X'), help='pixel; default centre')
    p.add_argument('--out', default='work_dirs/vis/rollout.png')
    args = parser.parse_args(argv)
    if args.cmd == 'decay':
        plot_decay(args.grid, args.heads, args.init_value, args.heads_range, args.query, args.out)
    elif args.cmd == 'groups':
        if args.group_size <= 0:
            parser.error(f'--group-size must be positive, got {args.group_size}')
        plot_groups(args.img_size, args.group_size, args.stride, args.query, args.out)
    else:
        plot_rollout(args.config, args.checkpoint, args.image, args.query, args.out)


if __name__ == '__main__':
    main()
