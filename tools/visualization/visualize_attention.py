#!/usr/bin/env python
"""Pictures of EVT's spatial prior and attention, drawn on a real photograph.

    # per-head decay of one query: Euclidean (EVT) vs Manhattan (RMT)   (paper Fig. 7 idea)
    python tools/visualization/visualize_attention.py decay --grid 14 14 --heads 4 --out decay.png
    # which tokens one query sees under EuSA-g, EuSA-d and full EuSA at an input size
    python tools/visualization/visualize_attention.py groups --img-size 224 320 \\
        --group-size 49 --out g.png
    # attention rollout per stage of a model on an image                (paper Fig. 8 idea)
    python tools/visualization/visualize_attention.py rollout CONFIG [IMAGE] \\
        --checkpoint CKPT --out r.png

The photograph is matplotlib's sample ``grace_hopper.jpg`` (in every matplotlib install)
unless ``--image PATH`` / ``IMAGE`` names another; ``--image none`` draws the decay and group
maps on a plain grid. The photo is centre-cropped to the picture's aspect ratio and resized.
Every picture is a PNG; nothing is shown on screen; an existing file is kept unless
``--overwrite`` is given.
"""
import argparse
import os
import os.path as osp
from typing import Optional, Sequence, Tuple

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from mmevt.patches.checkpoint_loading import strict_torch_load  # noqa: E402
from mmevt.utils.checkpoint import unwrap_state_dict  # noqa: E402
from mmevt.utils.sample_images import fit_image, sample_photo_path  # noqa: E402

DIM = 0.22  # brightness of what a query does not see


COLOURS = 0  # --colours: > 0 writes a palette PNG with that many colours (small files)


def _save(fig, out: str, overwrite: bool) -> None:
    if osp.exists(out) and not overwrite:
        plt.close(fig)
        raise SystemExit(f'{out} exists; pass --overwrite to replace it')
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=80, bbox_inches='tight')
    plt.close(fig)
    if COLOURS:
        with Image.open(out) as img:
            small = img.convert('RGB').quantize(COLOURS, method=Image.Quantize.MEDIANCUT)
        small.save(out, optimize=True)
    print(f'wrote {out}')


def _photo(image: Optional[str], h: int, w: int) -> Optional[np.ndarray]:
    """The photo as float RGB in [0, 1], ``(h, w, 3)``; None for ``--image none``."""
    if image is not None and image.lower() == 'none':
        return None
    return np.asarray(fit_image(Image.open(image or sample_photo_path()), h, w),
                      dtype=np.float32) / 255.


def _upsample(grid: np.ndarray, h: int, w: int) -> np.ndarray:
    """A per-token map ``(gh, gw)`` as pixels ``(h, w)`` (each token a block)."""
    rows = np.minimum(np.arange(h) * grid.shape[0] // h, grid.shape[0] - 1)
    cols = np.minimum(np.arange(w) * grid.shape[1] // w, grid.shape[1] - 1)
    return grid[rows][:, cols]


def _show_weighted(ax, photo: Optional[np.ndarray], weight: np.ndarray, **imshow) -> None:
    """The photo lit by ``weight`` in [0, 1] per token, or ``weight`` itself without one."""
    if photo is None:
        ax.imshow(weight, **imshow)
        return
    lit = _upsample(weight, *photo.shape[:2])[..., None]
    ax.imshow(photo * (DIM + (1 - DIM) * lit))


def _show_decay(ax, photo: Optional[np.ndarray], decay: np.ndarray) -> None:
    """``decay`` (per token, in [0, 1]) coloured over a grey photo, with iso-decay lines
    (circles for Euclidean, diamonds for Manhattan distance)."""
    gh, gw = decay.shape
    if photo is None:
        ax.imshow(decay, vmin=0, vmax=1, cmap='viridis')
        extent = (0, gw, 0, gh)
    else:
        ph, pw = photo.shape[:2]
        grey = photo.mean(-1, keepdims=True)
        colour = plt.get_cmap('viridis')(_upsample(decay, ph, pw))[..., :3]
        ax.imshow(0.45 * grey + 0.55 * colour)
        extent = (0, pw, 0, ph)
    # token centres in the drawn image's pixels
    xs = (np.arange(gw) + 0.5) * extent[1] / gw - (0.5 if photo is None else 0)
    ys = (np.arange(gh) + 0.5) * extent[3] / gh - (0.5 if photo is None else 0)
    ax.contour(xs, ys, decay, levels=[0.25, 0.5, 0.75], colors='white', linewidths=0.8)


def plot_decay(grid, heads, init_value, heads_range, query, out, image=None, stride=16,
               overwrite=False):
    """Per head, ``gamma ** dist`` from one query, Euclidean (EVT) and Manhattan (RMT)."""
    from mmevt.ops import decay_log_rates, grid_coords, pairwise_distance
    h, w = grid
    qr, qc = query if query else (h // 2, w // 2)
    lg = decay_log_rates(heads, init_value, heads_range)
    p = grid_coords((h, w))
    q = p[qr * w + qc][None]
    photo = _photo(image, h * stride, w * stride)
    s = 1 if photo is None else stride  # marker position in the drawn image
    fig, axes = plt.subplots(2, heads, figsize=(2.2 * heads, 4.6), squeeze=False)
    for row, kind in enumerate(('euclidean', 'manhattan')):
        dist = pairwise_distance(q, p, kind)[0].view(h, w)
        for hd in range(heads):
            ax = axes[row][hd]
            _show_decay(ax, photo, (lg[hd] * dist).exp().numpy())
            ax.plot(qc * s + (s - 1) / 2, qr * s + (s - 1) / 2, 'r+', markersize=10)
            ax.set_title(f'{kind[:3]}. head {hd}\ngamma={lg[hd].exp():.3f}', fontsize=8)
            ax.axis('off')
    fig.suptitle(f'decay gamma^dist from query ({qr}, {qc}) on a {h}x{w} token grid '
                 '(lines: 0.75, 0.5, 0.25)')
    _save(fig, out, overwrite)


def plot_groups(img_size, group_size, stride, query, out, image=None, overwrite=False):
    """The tokens one query attends to under each grouping of one stage."""
    from mmevt.analysis import visible_mask
    from mmevt.ops.grouping import square_side
    h, w = (-(-img_size[0] // stride), -(-img_size[1] // stride))
    qr, qc = query if query else (h // 2, w // 2)
    qi = qr * w + qc
    panels = [('group', 'EuSA-g (1D groups)'), ('dilate', 'EuSA-d (dilated)')]
    side = square_side(group_size)
    if side:  # the 2D counterparts of the ablation need square groups
        panels += [('window', f'2D windows {side}x{side}'), ('grid', f'2D grid {side}x{side}')]
    panels.append(('full', 'full EuSA'))
    photo = _photo(image, h * stride, w * stride)
    s = 1 if photo is None else stride
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4))
    for ax, (mode, name) in zip(axes, panels):
        seen = visible_mask((h, w), group_size, mode)[qi].view(h, w).numpy().astype(np.float32)
        _show_weighted(ax, photo, seen, cmap='Greys', vmin=0, vmax=1.4)
        ax.plot(qc * s + (s - 1) / 2, qr * s + (s - 1) / 2, 'r+', markersize=12,
                markeredgewidth=2)
        ax.set_title(f'{name}: {int(seen.sum())} tokens', fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])  # keep the frame: the grid's extent matters here
    fig.suptitle(f'input {img_size[0]}x{img_size[1]}, stride {stride} grid {h}x{w}, '
                 f'group size {group_size} tokens')
    _save(fig, out, overwrite)


def _rollout_size(size: Tuple[int, int], img_size: Optional[Sequence[int]]) -> Tuple[int, int]:
    """Input size for the rollout: ``img_size``, else the image's own if both sides are
    <= 320, else 224 x 224 (dense stage-1 matrices grow with the 4th power of the side)."""
    if img_size:
        return int(img_size[0]), int(img_size[1])
    w, h = size
    return (h, w) if max(h, w) <= 320 else (224, 224)


def plot_rollout(config, checkpoint, image, query, out, device='cpu', img_size=None,
                 overwrite=False):
    """Attention rollout of each stage of the config's backbone, for one query pixel."""
    from mmevt.analysis import attention_rollout
    from mmevt.toolkits import build_model, load_config

    # init_cfg dropped: a pretrained file the config names need not exist for a picture
    backbone = build_model(load_config(config), part='backbone', drop_init_cfg=True,
                           name=config)
    if checkpoint:
        _load_backbone(backbone, checkpoint)
    image = image or sample_photo_path()
    src = Image.open(image).convert('RGB')
    H, W = _rollout_size(src.size, img_size)
    pil = fit_image(src, H, W)
    print(f'rollout of {osp.basename(config)} on {image} at {H}x{W}')
    arr = np.asarray(pil).astype(np.float32)
    mean, std = np.array([123.675, 116.28, 103.53]), np.array([58.395, 57.12, 57.375])
    x = torch.from_numpy((arr - mean) / std).permute(2, 0, 1)[None].float().to(device)
    maps = attention_rollout(backbone.to(device), x)
    fig, axes = plt.subplots(1, len(maps) + 1, figsize=(3.2 * (len(maps) + 1), 3.4))
    axes[0].imshow(pil)
    axes[0].set_title(f'image {H}x{W}' + ('' if checkpoint else ' (random weights)'),
                      fontsize=9)
    axes[0].axis('off')
    qy, qx = query if query else (H // 2, W // 2)
    axes[0].plot(qx, qy, 'r+', markersize=12)
    for i, (ax, m) in enumerate(zip(axes[1:], maps)):
        h, w = m['hw']
        qi = min(int(qy * h / H), h - 1) * w + min(int(qx * w / W), w - 1)
        heat = m['rollout'][qi].view(h, w).numpy()
        heat = np.asarray(Image.fromarray(heat / max(heat.max(), 1e-12)).resize((W, H)))
        ax.imshow(pil)
        ax.imshow(heat, cmap='jet', alpha=0.5)
        ax.plot(qx, qy, 'w+', markersize=10)
        ax.set_title(f'stage {i + 1} ({h}x{w}) rollout', fontsize=9)
        ax.axis('off')
    _save(fig, out, overwrite)


def _load_backbone(backbone, checkpoint):
    """Backbone weights from a full-model or a backbone-only checkpoint."""
    state = unwrap_state_dict(strict_torch_load(checkpoint, map_location='cpu'))
    prefix = 'backbone.' if any(k.startswith('backbone.') for k in state) else None
    try:
        backbone.load_pretrained(checkpoint, prefix)
    except ValueError as err:
        raise SystemExit(f'{checkpoint}: backbone keys do not match the config: {err}')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='cmd', required=True)
    photo_help = ("photo under the maps (default: matplotlib's grace_hopper.jpg); "
                  "'none': plain grid")
    p = sub.add_parser('decay', help='per-head decay maps, Euclidean vs Manhattan')
    p.add_argument('--grid', type=int, nargs=2, default=[14, 14], metavar=('H', 'W'))
    p.add_argument('--heads', type=int, default=4)
    p.add_argument('--init-value', type=float, default=2.)
    p.add_argument('--heads-range', type=float, default=4.)
    p.add_argument('--query', type=int, nargs=2, metavar=('ROW', 'COL'))
    p.add_argument('--image', help=photo_help)
    p.add_argument('--out', default='work_dirs/vis/decay.png')
    p.add_argument('--overwrite', action='store_true')
    p = sub.add_parser('groups', help='tokens one query sees under g / d / 2D window / '
                       '2D grid / full')
    p.add_argument('--img-size', type=int, nargs=2, default=[224, 224], metavar=('H', 'W'))
    p.add_argument('--group-size', type=int, default=49)
    p.add_argument('--stride', type=int, default=4, help='stage stride: 4, 8, 16 or 32')
    p.add_argument('--query', type=int, nargs=2, metavar=('ROW', 'COL'))
    p.add_argument('--image', help=photo_help)
    p.add_argument('--out', default='work_dirs/vis/groups.png')
    p.add_argument('--overwrite', action='store_true')
    p = sub.add_parser('rollout', help='attention rollout per stage on an image')
    p.add_argument('config')
    p.add_argument('image', nargs='?', help="default: matplotlib's grace_hopper.jpg")
    p.add_argument('--checkpoint', help='full-model or backbone checkpoint; default: random')
    p.add_argument('--img-size', type=int, nargs=2, metavar=('H', 'W'),
                   help='model input size (default: the image, or 224 224 if a side > 320)')
    p.add_argument('--query', type=int, nargs=2, metavar=('Y', 'X'), help='pixel; default centre')
    p.add_argument('--out', default='work_dirs/vis/rollout.png')
    p.add_argument('--overwrite', action='store_true')
    for p in sub.choices.values():
        p.add_argument('--colours', type=int, default=0, metavar='N',
                       help='palette PNG with N colours (2..256), for small files; '
                       'default: full colour')
    args = parser.parse_args(argv)
    if args.colours and not 2 <= args.colours <= 256:
        parser.error(f'--colours must be in 2..256, got {args.colours}')
    global COLOURS
    COLOURS = args.colours
    grid = args.grid if args.cmd == 'decay' else None
    if grid and min(grid) <= 0:
        parser.error(f'--grid must be positive, got {grid}')
    query = getattr(args, 'query', None)
    if args.cmd == 'decay':
        if query and not (0 <= query[0] < grid[0] and 0 <= query[1] < grid[1]):
            parser.error(f'--query {query} is outside the {grid[0]}x{grid[1]} grid')
        plot_decay(grid, args.heads, args.init_value, args.heads_range, query, args.out,
                   args.image, overwrite=args.overwrite)
    elif args.cmd == 'groups':
        if args.group_size <= 0:
            parser.error(f'--group-size must be positive, got {args.group_size}')
        gh, gw = (-(-args.img_size[0] // args.stride), -(-args.img_size[1] // args.stride))
        if query and not (0 <= query[0] < gh and 0 <= query[1] < gw):
            parser.error(f'--query {query} is outside the {gh}x{gw} token grid')
        plot_groups(args.img_size, args.group_size, args.stride, query, args.out, args.image,
                    overwrite=args.overwrite)
    else:
        plot_rollout(args.config, args.checkpoint, args.image, query, args.out,
                     img_size=args.img_size, overwrite=args.overwrite)


if __name__ == '__main__':
    main()
