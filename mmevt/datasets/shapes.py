"""A deterministic "shapes" dataset: coloured circles, squares and triangles on textured
backgrounds, written both in COCO instance format and in the ADE20K directory layout.

Layout under ``root``::

    images/training/000000.jpg ...          images/validation/...
    annotations/instances_training.json     annotations/instances_validation.json  (COCO)
    annotations/training/000000.png ...     annotations/validation/...             (ADE20K)

Label PNGs follow ADE20K's convention for ``reduce_zero_label=True``: 0 is "ignore",
1 is background, 2/3/4 are circle/square/triangle (classes 0..3 after reduction).
"""
import json
import math
import os
import os.path as osp
from typing import Dict, List, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw

SHAPE_CLASSES = ('circle', 'square', 'triangle')
# classification: one shape per image, told apart by its number of sides
CLS_CLASSES = ('triangle', 'square', 'pentagon', 'hexagon', 'octagon', 'circle')
SPLITS = ('training', 'validation')


def random_background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Smooth colour gradient + stripes + noise, uint8 ``(h, w, 3)``."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = rng.uniform(60, 190, size=3)
    grad = rng.uniform(-40, 40, size=(2, 3))
    freq, phase = rng.uniform(0.05, 0.25), rng.uniform(0, 2 * np.pi)
    angle = rng.uniform(0, np.pi)
    stripes = 12 * np.sin(freq * (xx * np.cos(angle) + yy * np.sin(angle)) + phase)
    img = (base + grad[0] * (yy / h)[..., None] + grad[1] * (xx / w)[..., None] +
           stripes[..., None] + rng.normal(0, 6, size=(h, w, 3)))
    return np.clip(img, 0, 255).astype(np.uint8)


_SIDES = {'triangle': 3, 'square': 4, 'pentagon': 5, 'hexagon': 6, 'octagon': 8,
          'circle': 32}


def _polygon(kind: str, cx: float, cy: float, r: float, rot: float) -> List[Tuple[float, float]]:
    n = _SIDES[kind]
    start = 0. if kind == 'circle' else rot
    return [(cx + r * math.cos(start + 2 * math.pi * i / n),
             cy + r * math.sin(start + 2 * math.pi * i / n)) for i in range(n)]


def _poly_area(pts: Sequence[Tuple[float, float]]) -> float:
    x, y = np.array(pts).T
    return float(0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))


def _make_image(rng: np.random.Generator, h: int, w: int, max_shapes: int):
    img = Image.fromarray(random_background(rng, h, w))
    seg = Image.new('L', (w, h), 1)
    draw, seg_draw = ImageDraw.Draw(img), ImageDraw.Draw(seg)
    placed: List[Tuple[float, float, float]] = []
    objects = []
    r_min, r_max = 0.08 * min(h, w), 0.2 * min(h, w)
    for _ in range(int(rng.integers(1, max_shapes + 1))):
        for _attempt in range(20):  # rejection sampling: shapes do not overlap
            r = rng.uniform(r_min, r_max)
            cx, cy = rng.uniform(r, w - r), rng.uniform(r, h - r)
            if all(math.hypot(cx - x, cy - y) > r + rr + 2 for x, y, rr in placed):
                break
        else:
            continue
        placed.append((cx, cy, r))
        label = int(rng.integers(len(SHAPE_CLASSES)))
        pts = _polygon(SHAPE_CLASSES[label], cx, cy, r, rng.uniform(0, math.pi))
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        draw.polygon(pts, fill=colour, outline=(0, 0, 0))
        seg_draw.polygon(pts, fill=label + 2)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        x0, y0 = max(min(xs), 0), max(min(ys), 0)
        x1, y1 = min(max(xs), w), min(max(ys), h)
        objects.append(dict(category_id=label + 1, bbox=[x0, y0, x1 - x0, y1 - y0],
                            segmentation=[[round(v, 2) for p in pts for v in p]],
                            area=_poly_area(pts), iscrowd=0))
    return img, seg, objects


def made_before(stamp: str, settings: dict, overwrite: bool, what: str) -> bool:
    """Whether the dataset whose stamp file is ``stamp`` was already made with ``settings``
    (so the generator can return at once); never overwrites a different one unasked.

    Raises:
        FileExistsError: the directory holds a ``what`` dataset made with other settings
            and ``overwrite`` is False.
    """
    if not osp.isfile(stamp) or overwrite:
        return False
    with open(stamp) as f:
        existing = json.load(f)
    if existing == settings:
        return True
    root = osp.dirname(stamp)
    raise FileExistsError(f'{root} holds a {what} dataset made with {existing}, not '
                          f'{settings}; choose another directory or pass overwrite=True')


def generate_shapes(root: str,
                    num_train: int = 64,
                    num_val: int = 16,
                    img_size: Tuple[int, int] = (128, 128),
                    max_shapes: int = 4,
                    seed: int = 0,
                    overwrite: bool = False) -> Dict[str, str]:
    """Write the shapes dataset to ``root`` (deterministic for a given ``seed``).

    An existing complete dataset with the same settings is reused, not rewritten, unless
    ``overwrite``; a different one at ``root`` is an error (nothing is silently replaced).

    Args:
        root (str): output directory.
        num_train (int): training images. Defaults to 64.
        num_val (int): validation images. Defaults to 16.
        img_size (tuple[int, int]): ``(H, W)``. Defaults to ``(128, 128)``.
        max_shapes (int): at most this many shapes per image. Defaults to 4.
        seed (int): RNG seed. Defaults to 0.
        overwrite (bool): rewrite even if present. Defaults to False.

    Returns:
        dict: paths of the COCO annotation files and image / label directories.
    """
    if num_train < 1 or num_val < 1:
        raise ValueError(f'num_train and num_val must be >= 1, got {num_train}, {num_val}')
    h, w = img_size
    if h < 32 or w < 32:
        raise ValueError(f'img_size must be at least 32 x 32, got {img_size}')
    settings = dict(num_train=num_train, num_val=num_val, img_size=[h, w],
                    max_shapes=max_shapes, seed=seed)
    stamp = osp.join(root, 'shapes.json')
    paths = {f'coco_{s}': osp.join(root, 'annotations', f'instances_{s}.json') for s in SPLITS}
    if made_before(stamp, settings, overwrite, 'shapes'):
        return paths
    rng = np.random.default_rng(seed)
    categories = [dict(id=i + 1, name=n) for i, n in enumerate(SHAPE_CLASSES)]
    for split, count in zip(SPLITS, (num_train, num_val)):
        img_dir = osp.join(root, 'images', split)
        seg_dir = osp.join(root, 'annotations', split)
        os.makedirs(img_dir, exist_ok=True)
        os.makedirs(seg_dir, exist_ok=True)
        images, annotations = [], []
        for i in range(count):
            img, seg, objects = _make_image(rng, h, w, max_shapes)
            name = f'{i:06d}'
            img.save(osp.join(img_dir, name + '.jpg'), quality=95)
            seg.save(osp.join(seg_dir, name + '.png'))
            images.append(dict(id=i + 1, file_name=name + '.jpg', height=h, width=w))
            for obj in objects:
                annotations.append(dict(obj, id=len(annotations) + 1, image_id=i + 1))
        with open(paths[f'coco_{split}'], 'w') as f:
            json.dump(dict(images=images, annotations=annotations, categories=categories), f)
    with open(stamp, 'w') as f:
        json.dump(settings, f)
    return paths


def generate_shape_classes(root: str,
                           num_train: int = 8,
                           num_val: int = 4,
                           img_size: Tuple[int, int] = (64, 64),
                           seed: int = 0) -> Dict[str, str]:
    """An ImageNet-layout classification set: one shape per image, six classes.

    Writes ``train/<class>/*.jpg``, ``val/<class>/*.jpg`` and ``meta/{train,val}.txt``
    (``<class>/<file> <label>`` per line), the layout of mmpretrain's ``ImageNet`` /
    ``CustomDataset``. ``num_train`` / ``num_val`` are per class.

    Returns:
        dict: the annotation file of each split.
    """
    h, w = img_size
    if h < 32 or w < 32:
        raise ValueError(f'img_size must be at least 32 x 32, got {img_size}')
    rng = np.random.default_rng(seed)
    os.makedirs(osp.join(root, 'meta'), exist_ok=True)
    anns = {}
    for split, count in (('train', num_train), ('val', num_val)):
        lines = []
        for label, name in enumerate(CLS_CLASSES):
            os.makedirs(osp.join(root, split, name), exist_ok=True)
            for i in range(count):
                img = Image.fromarray(random_background(rng, h, w))
                r = rng.uniform(0.25, 0.4) * min(h, w)
                cx, cy = rng.uniform(r, w - r), rng.uniform(r, h - r)
                pts = _polygon(name, cx, cy, r, rng.uniform(0, math.pi))
                colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
                ImageDraw.Draw(img).polygon(pts, fill=colour, outline=(0, 0, 0))
                rel = f'{name}/{i:05d}.jpg'
                img.save(osp.join(root, split, rel), quality=95)
                lines.append(f'{rel} {label}')
        anns[split] = osp.join(root, 'meta', f'{split}.txt')
        with open(anns[split], 'w') as f:
            f.write('\n'.join(lines) + '\n')
    return anns
