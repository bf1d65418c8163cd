"""A deterministic aerial set in DOTA v1.0's layout: full-size images of oriented objects.

Each image shows a few elongated objects at any angle over a textured background: two of
DOTA's classes (:data:`DOTA_CLASSES`), each in a shape and a hue band of its own, so that a
small detector can learn them in minutes. A large vehicle is a plain rectangle; a ship is a
hull with a pointed bow inside its rectangle. Objects never overlap and are whole in the
image. The annotations are DOTA v1.0's ``labelTxt`` files, header lines included::

    imagesource:mmevt
    gsd:0.5
    x1 y1 x2 y2 x3 y3 x4 y4 class difficulty

(the corners of the object's oriented rectangle, clockwise in image coordinates). Like
DOTA's own images, these are meant to be cut into patches by mmrotate's
``tools/data/dota/split/img_split.py`` before training. Layout under ``root``::

    train/images/P0000.png ...   train/labelTxt/P0000.txt ...
    val/images/...               val/labelTxt/...
"""
import colorsys
import json
import math
import os
import os.path as osp
from typing import Dict, List, Tuple

import numpy as np
from PIL import Image, ImageDraw

from .shapes import made_before, random_background

DOTA_CLASSES = ('large-vehicle', 'ship')
SPLITS = ('train', 'val')
_LENGTH = (28., 44.)  # long side in pixels: DOTA's vehicles and small ships after the split
_ASPECT = (2.2, 3.2)  # long side / short side


def _corners(cx: float, cy: float, length: float, width: float,
             angle: float) -> np.ndarray:
    """The 4 corners ``(4, 2)`` of a ``length x width`` rectangle turned by ``angle``."""
    u = np.array([math.cos(angle), math.sin(angle)])  # along the long side
    v = np.array([-u[1], u[0]])
    half_l, half_w = length / 2, width / 2
    return np.array([cx, cy]) + np.array([-half_l * u - half_w * v, half_l * u - half_w * v,
                                          half_l * u + half_w * v, -half_l * u + half_w * v])


def _outline(kind: str, corners: np.ndarray) -> List[Tuple[float, float]]:
    """What is drawn of an object: its rectangle, or for a ship a hull whose bow comes to a
    point at the middle of one short side."""
    if kind == 'large-vehicle':
        return [tuple(p) for p in corners]
    a, b, c, d = corners  # a -> b along the long side, b -> c across it at the bow end
    bow = (b + c) / 2
    return [tuple(p) for p in (a, a + 0.7 * (b - a), bow, d + 0.7 * (c - d), d)]


def _make_image(rng: np.random.Generator, h: int, w: int, max_objects: int):
    img = Image.fromarray(random_background(rng, h, w))
    draw = ImageDraw.Draw(img)
    placed: List[Tuple[float, float, float]] = []  # centre and half-length of each object
    objects = []
    for _ in range(int(rng.integers(1, max_objects + 1))):
        label = int(rng.integers(len(DOTA_CLASSES)))
        length = rng.uniform(*_LENGTH)
        width = length / rng.uniform(*_ASPECT)
        half = length / 2
        for _ in range(20):  # a place inside the image, away from the other objects
            cx, cy = rng.uniform(half + 2, w - half - 2), rng.uniform(half + 2, h - half - 2)
            if all(math.hypot(cx - x, cy - y) > half + r + 2 for x, y, r in placed):
                break
        else:
            continue
        placed.append((cx, cy, half))
        corners = _corners(cx, cy, length, width, rng.uniform(0, math.pi))
        hue = (label + rng.uniform(-0.25, 0.25)) / len(DOTA_CLASSES) + 0.05
        colour = tuple(int(255 * c) for c in colorsys.hsv_to_rgb(hue % 1.0, rng.uniform(0.6, 1),
                                                                  rng.uniform(0.6, 1)))
        draw.polygon(_outline(DOTA_CLASSES[label], corners), fill=colour, outline=(0, 0, 0))
        objects.append((corners, DOTA_CLASSES[label]))
    return img, objects


def generate_dota(root: str,
                  num_train: int = 24,
                  num_val: int = 8,
                  img_size: Tuple[int, int] = (256, 256),
                  max_objects: int = 6,
                  seed: int = 0,
                  overwrite: bool = False) -> Dict[str, str]:
    """Write the aerial set to ``root`` (deterministic for a given ``seed``).

    Args:
        root (str): output directory.
        num_train (int): training images. Defaults to 24.
        num_val (int): validation images. Defaults to 8.
        img_size (tuple[int, int]): ``(H, W)`` of the full images, at least 64 x 64.
            Defaults to ``(256, 256)``.
        max_objects (int): at most this many objects an image (at least one). Defaults to 6.
        seed (int): the random seed. Defaults to 0.
        overwrite (bool): replace a set made there with other settings. Defaults to False.

    Returns:
        dict: the image and ``labelTxt`` folders of each split (``train_images``,
        ``train_labelTxt``, ``val_images``, ``val_labelTxt``).

    Raises:
        ValueError: a size or count out of range.
        FileExistsError: ``root`` holds a set made with other settings and ``overwrite`` is
            False.
    """
    h, w = img_size
    if h < 64 or w < 64:
        raise ValueError(f'img_size must be at least 64 x 64 (the objects are up to '
                         f'{_LENGTH[1]:.0f} pixels long), got {img_size}')
    if num_train < 1 or num_val < 1 or max_objects < 1:
        raise ValueError(f'num_train, num_val and max_objects must be at least 1, got '
                         f'{num_train}, {num_val} and {max_objects}')
    settings = dict(num_train=num_train, num_val=num_val, img_size=[h, w],
                    max_objects=max_objects, seed=seed, classes=list(DOTA_CLASSES))
    stamp = osp.join(root, 'dota.json')
    paths = {f'{split}_{kind}': osp.join(root, split, kind)
             for split in SPLITS for kind in ('images', 'labelTxt')}
    if made_before(stamp, settings, overwrite, 'DOTA'):
        return paths
    rng = np.random.default_rng(seed)
    for split, count in zip(SPLITS, (num_train, num_val)):
        for kind in ('images', 'labelTxt'):
            os.makedirs(paths[f'{split}_{kind}'], exist_ok=True)
        for i in range(count):
            img, objects = _make_image(rng, h, w, max_objects)
            name = f'P{i:04d}'
            img.save(osp.join(paths[f'{split}_images'], name + '.png'))
            lines = ['imagesource:mmevt', 'gsd:0.5']
            lines += [' '.join(f'{v:.1f}' for v in corners.reshape(-1)) + f' {label} 0'
                      for corners, label in objects]
            with open(osp.join(paths[f'{split}_labelTxt'], name + '.txt'), 'w') as f:
                f.write('\n'.join(lines) + '\n')
    with open(stamp, 'w') as f:
        json.dump(settings, f)
    return paths
