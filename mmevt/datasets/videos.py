"""A deterministic video set in mmaction2's ``rawframes`` layout: one moving shape per clip.

Each clip shows one shape drifting in a straight line and turning over a textured background
that flickers with noise from frame to frame. Its class (:data:`ACTION_CLASSES`) is its kind
(the number of sides) and its colour (a hue band of the class's own, random within it). The
class is in the appearance of every frame and not in the motion, which is random: TSN, which
averages its segments' scores and cannot see their order, can learn it from any 3 segments. Layout under ``root`` (mmaction2's ``RawframeDataset``:
``filename_tmpl='img_{:05}.jpg'``, ``start_index=1``)::

    rawframes/train/square_0000/img_00001.jpg ...  rawframes/val/...
    train_list_rawframes.txt   val_list_rawframes.txt   (``frame_dir total_frames label``)
"""
import colorsys
import json
import math
import os
import os.path as osp
from typing import Dict, Tuple

import numpy as np
from PIL import Image, ImageDraw

from .shapes import _polygon, made_before, random_background

ACTION_CLASSES = ('triangle', 'square', 'hexagon', 'circle')
SPLITS = ('train', 'val')


def _write_clip(rng: np.random.Generator, folder: str, label: int, num_frames: int,
                img_size: Tuple[int, int]) -> None:
    h, w = img_size
    background = random_background(rng, h, w).astype(np.float32)
    r = rng.uniform(0.25, 0.35) * min(h, w)
    # start and end inside the frame: the shape is whole in every frame
    (x0, x1), (y0, y1) = rng.uniform(r, w - r, size=2), rng.uniform(r, h - r, size=2)
    rot0, spin = rng.uniform(0, math.pi), rng.uniform(-0.3, 0.3)
    hue = (label + rng.uniform(-0.3, 0.3)) / len(ACTION_CLASSES)
    colour = tuple(int(255 * c) for c in colorsys.hsv_to_rgb(hue % 1.0, rng.uniform(0.6, 1),
                                                              rng.uniform(0.6, 1)))
    os.makedirs(folder, exist_ok=True)
    for t in range(num_frames):
        a = t / max(1, num_frames - 1)
        noisy = background + rng.normal(0, 6, size=background.shape)
        img = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
        pts = _polygon(ACTION_CLASSES[label], x0 + a * (x1 - x0), y0 + a * (y1 - y0), r, rot0 + spin * t)
        ImageDraw.Draw(img).polygon(pts, fill=colour, outline=(0, 0, 0))
        img.save(osp.join(folder, f'img_{t + 1:05d}.jpg'), quality=95)


def generate_rawframes(root: str,
                       num_train: int = 8,
                       num_val: int = 4,
                       num_frames: int = 8,
                       img_size: Tuple[int, int] = (64, 64),
                       seed: int = 0,
                       overwrite: bool = False) -> Dict[str, str]:
    """Write the moving-shapes clips to ``root`` (deterministic for a given ``seed``).

    Args:
        root (str): output directory.
        num_train (int): training clips per class. Defaults to 8.
        num_val (int): validation clips per class. Defaults to 4.
        num_frames (int): frames per clip, at least 3 (TSN's segments). Defaults to 8.
        img_size (tuple[int, int]): ``(H, W)`` of the frames, at least 32 x 32. Defaults to
            ``(64, 64)``.
        seed (int): the random seed. Defaults to 0.
        overwrite (bool): replace a set made there with other settings. Defaults to False.

    Returns:
        dict: the annotation file of each split, ``{'train': ..., 'val': ...}``.

    Raises:
        ValueError: a size or count out of range.
        FileExistsError: ``root`` holds a set made with other settings and ``overwrite`` is
            False.
    """
    h, w = img_size
    if h < 32 or w < 32:
        raise ValueError(f'img_size must be at least 32 x 32, got {img_size}')
    if num_frames < 3:
        raise ValueError(f'num_frames must be at least 3 (TSN samples 3 segments), got '
                         f'{num_frames}')
    if num_train < 1 or num_val < 1:
        raise ValueError(f'num_train and num_val must be at least 1, got {num_train} and '
                         f'{num_val}')
    settings = dict(num_train=num_train, num_val=num_val, num_frames=num_frames,
                    img_size=[h, w], seed=seed, classes=list(ACTION_CLASSES))
    stamp = osp.join(root, 'rawframes.json')
    anns = {split: osp.join(root, f'{split}_list_rawframes.txt') for split in SPLITS}
    if made_before(stamp, settings, overwrite, 'rawframes'):
        return anns
    rng = np.random.default_rng(seed)
    for split, count in zip(SPLITS, (num_train, num_val)):
        lines = []
        for i in range(count):
            for label, kind in enumerate(ACTION_CLASSES):
                clip = f'{split}/{kind}_{i:04d}'
                _write_clip(rng, osp.join(root, 'rawframes', clip), label, num_frames, img_size)
                lines.append(f'{clip} {num_frames} {label}')
        with open(anns[split], 'w') as f:
            f.write('\n'.join(lines) + '\n')
    with open(stamp, 'w') as f:
        json.dump(settings, f)
    return anns
