"""A deterministic COCO person-keypoints dataset: one stick figure per image, its 17 COCO
keypoints at known positions, on the shapes dataset's textured backgrounds.

Layout under ``root`` (COCO's, with the shapes dataset's split names)::

    images/training/000000.jpg ...                 images/validation/...
    annotations/person_keypoints_training.json     annotations/person_keypoints_validation.json

Each figure faces the camera (its left side on the image's right, as COCO labels people
seen from the front) with random size, place and limb angles; arms and legs stay on their
own side, so left and right are told apart by position. Each keypoint is a dot whose colour
names its joint (a left / right pair shares it, so a horizontal flip, which swaps their
labels, keeps image and labels consistent), on limbs drawn as lines. Every keypoint is
visible (``v=2``); ``bbox`` is the keypoints' extent plus a margin, ``area`` the box's.
"""
import json
import math
import os
import os.path as osp
from typing import Dict, List, Tuple

import numpy as np
from PIL import Image, ImageDraw

from .shapes import SPLITS, made_before, random_background

KEYPOINT_NAMES = (
    'nose', 'left_eye', 'right_eye', 'left_ear', 'right_ear', 'left_shoulder',
    'right_shoulder', 'left_elbow', 'right_elbow', 'left_wrist', 'right_wrist', 'left_hip',
    'right_hip', 'left_knee', 'right_knee', 'left_ankle', 'right_ankle')
# COCO's person skeleton (1-based keypoint ids, as in its annotation files)
SKELETON = [[16, 14], [14, 12], [17, 15], [15, 13], [12, 13], [6, 12], [7, 13], [6, 7],
            [6, 8], [7, 9], [8, 10], [9, 11], [2, 3], [1, 2], [1, 3], [2, 4], [3, 5], [4, 6],
            [5, 7]]
# One colour per joint (a left / right pair shares it): nose, eye, ear, shoulder, elbow,
# wrist, hip, knee, ankle.
_JOINT_COLOURS = ((255, 255, 255), (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0),
                  (255, 0, 255), (0, 255, 255), (255, 128, 0), (128, 0, 255))
_JOINT_OF = [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8]  # keypoint -> joint


def _figure(rng: np.random.Generator) -> np.ndarray:
    """Keypoints of one figure, ``(17, 2)``, in units of its height (y down, x = 0 the
    body's axis, +x its left side)."""
    kps = np.zeros((17, 2))
    kps[0] = (0, 0.08)
    kps[1:5] = [(0.03, 0.06), (-0.03, 0.06), (0.06, 0.08), (-0.06, 0.08)]
    kps[5:7] = [(0.12, 0.2), (-0.12, 0.2)]
    kps[11:13] = [(0.08, 0.52), (-0.08, 0.52)]
    for side in (0, 1):  # 0: left (+x), 1: right (-x); angles from straight down, outwards
        sign = 1. if side == 0 else -1.
        upper, lower = rng.uniform(0.1, 2.2), rng.uniform(-0.3, 0.9)
        thigh, shin = rng.uniform(0.02, 0.5), rng.uniform(-0.2, 0.3)
        for start, joints, angles, lengths in (
                (5 + side, (7 + side, 9 + side), (upper, upper + lower), (0.15, 0.14)),
                (11 + side, (13 + side, 15 + side), (thigh, thigh + shin), (0.24, 0.24))):
            point = kps[start]
            for j, a, length in zip(joints, angles, lengths):
                point = point + length * np.array([sign * math.sin(a), math.cos(a)])
                kps[j] = point
    return kps


def _draw_person(rng: np.random.Generator, h: int, w: int):
    """One image with one figure, and its COCO annotation (without ids)."""
    img = Image.fromarray(random_background(rng, h, w))
    kps = _figure(rng)
    lo, hi = kps.min(0), kps.max(0)
    # the figure's height in pixels, smaller where its width would not fit the image
    scale = min(rng.uniform(0.55, 0.85) * h / (hi[1] - lo[1]),
                0.85 * w / (hi[0] - lo[0]))
    size = (hi - lo) * scale
    offset = np.array([rng.uniform(0.05 * w, w - 0.05 * w - size[0]),
                       rng.uniform(0.05 * h, h - 0.05 * h - size[1])])
    kps = (kps - lo) * scale + offset
    draw = ImageDraw.Draw(img)
    limb = tuple(int(c) for c in rng.integers(0, 256, size=3))
    width = max(1, round(0.025 * size[1]))
    for a, b in SKELETON:
        draw.line([tuple(kps[a - 1]), tuple(kps[b - 1])], fill=limb, width=width)
    r = max(1.5, 0.025 * size[1])
    for k, (x, y) in enumerate(kps):
        draw.ellipse([x - r, y - r, x + r, y + r], fill=_JOINT_COLOURS[_JOINT_OF[k]],
                     outline=(0, 0, 0))
    margin = 0.1 * size
    x0, y0 = np.maximum(kps.min(0) - margin, 0)
    x1, y1 = np.minimum(kps.max(0) + margin, (w, h))
    bbox = [round(float(v), 2) for v in (x0, y0, x1 - x0, y1 - y0)]
    keypoints: List[float] = []
    for x, y in kps:
        keypoints += [round(float(x), 2), round(float(y), 2), 2]
    return img, dict(category_id=1, bbox=bbox, area=round(bbox[2] * bbox[3], 2), iscrowd=0,
                     keypoints=keypoints, num_keypoints=len(kps))


def generate_keypoints(root: str,
                       num_train: int = 64,
                       num_val: int = 16,
                       img_size: Tuple[int, int] = (128, 128),
                       seed: int = 0,
                       overwrite: bool = False) -> Dict[str, str]:
    """Write the keypoints dataset to ``root`` (deterministic for a given ``seed``).

    As :func:`~mmevt.datasets.generate_shapes`, an existing complete dataset with the same
    settings is reused, a different one at ``root`` is an error unless ``overwrite``.

    Args:
        root (str): output directory.
        num_train (int): training images (one person each). Defaults to 64.
        num_val (int): validation images. Defaults to 16.
        img_size (tuple[int, int]): ``(H, W)``. Defaults to ``(128, 128)``.
        seed (int): RNG seed. Defaults to 0.
        overwrite (bool): rewrite even if present. Defaults to False.

    Returns:
        dict: the annotation file of each split (``keypoints_training`` /
        ``keypoints_validation``).

    Raises:
        ValueError: fewer than one image per split, or an image under 32 x 32.
        FileExistsError: ``root`` holds a keypoints dataset made with other settings.
    """
    if num_train < 1 or num_val < 1:
        raise ValueError(f'num_train and num_val must be >= 1, got {num_train}, {num_val}')
    h, w = img_size
    if h < 32 or w < 32:
        raise ValueError(f'img_size must be at least 32 x 32, got {img_size}')
    settings = dict(num_train=num_train, num_val=num_val, img_size=[h, w], seed=seed)
    stamp = osp.join(root, 'keypoints.json')
    paths = {f'keypoints_{s}': osp.join(root, 'annotations', f'person_keypoints_{s}.json')
             for s in SPLITS}
    if made_before(stamp, settings, overwrite, 'keypoints'):
        return paths
    rng = np.random.default_rng(seed)
    categories = [dict(id=1, name='person', supercategory='person',
                       keypoints=list(KEYPOINT_NAMES), skeleton=SKELETON)]
    os.makedirs(osp.join(root, 'annotations'), exist_ok=True)
    for split, count in zip(SPLITS, (num_train, num_val)):
        img_dir = osp.join(root, 'images', split)
        os.makedirs(img_dir, exist_ok=True)
        images, annotations = [], []
        for i in range(count):
            img, ann = _draw_person(rng, h, w)
            name = f'{i:06d}.jpg'
            img.save(osp.join(img_dir, name), quality=95)
            images.append(dict(id=i + 1, file_name=name, height=h, width=w))
            annotations.append(dict(ann, id=i + 1, image_id=i + 1))
        with open(paths[f'keypoints_{split}'], 'w') as f:
            json.dump(dict(images=images, annotations=annotations, categories=categories), f)
    with open(stamp, 'w') as f:
        json.dump(settings, f)
    return paths
