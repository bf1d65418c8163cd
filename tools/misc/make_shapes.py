#!/usr/bin/env python
"""Generate the synthetic "shapes" datasets used by the demo and the tests.

    # detection / segmentation: COCO instances + ADE20K layout under OUT
    python tools/misc/make_shapes.py data/shapes --num-train 400 --num-val 50 --size 128 128
    # classification: ImageNet layout (class folders + meta/{train,val}.txt)
    python tools/misc/make_shapes.py data/shape_cls --classification --num-train 100
    # pose: COCO person keypoints, one stick figure per image (the pose demo's data)
    python tools/misc/make_shapes.py data/demo_pose --keypoints --num-train 64
    # action recognition: mmaction2 rawframes, one moving shape per clip (4 classes)
    python tools/misc/make_shapes.py data/demo_action --rawframes --num-train 16 --size 64 64
    # rotated detection: DOTA v1.0 full-size images + labelTxt (split them with mmrotate's
    # tools/data/dota/split/img_split.py; docs/rotated.md)
    python tools/misc/make_shapes.py data/dota_full --dota --num-train 24 --size 256 256

Deterministic for a given --seed; an existing dataset made with other settings is never
overwritten unless --overwrite is given.
"""
import argparse


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out', help='output directory')
    parser.add_argument('--num-train', type=int, default=64,
                        help='training images (per class with --classification, '
                        '--rawframes: clips)')
    parser.add_argument('--num-val', type=int, default=16,
                        help='validation images (per class with --classification, '
                        '--rawframes: clips)')
    parser.add_argument('--size', type=int, nargs=2, default=[128, 128], metavar=('H', 'W'))
    parser.add_argument('--max-shapes', type=int, default=4, help='shapes per image, at most')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--classification', action='store_true',
                        help='one shape per image, ImageNet layout, 6 classes')
    parser.add_argument('--keypoints', action='store_true',
                        help='COCO person keypoints: one figure per image, 17 keypoints')
    parser.add_argument('--rawframes', action='store_true',
                        help='mmaction2 rawframes: one moving shape per clip, 4 classes')
    parser.add_argument('--dota', action='store_true',
                        help='DOTA v1.0 labelTxt: full-size images of oriented objects, 2 '
                        'classes (--max-shapes: objects an image, at most)')
    parser.add_argument('--frames', type=int, default=8, help='frames per clip (--rawframes)')
    parser.add_argument('--overwrite', action='store_true')
    args = parser.parse_args(argv)
    kinds = [k for k in ('classification', 'keypoints', 'rawframes', 'dota')
             if getattr(args, k)]
    if len(kinds) > 1:
        parser.error(' and '.join(f'--{k}' for k in kinds) + ' exclude each other')
    from mmevt.datasets import (generate_dota, generate_keypoints, generate_rawframes,
                                generate_shape_classes, generate_shapes)
    try:
        if args.dota:
            out = generate_dota(args.out, args.num_train, args.num_val, tuple(args.size),
                                args.max_shapes, args.seed, args.overwrite)
        elif args.rawframes:
            out = generate_rawframes(args.out, args.num_train, args.num_val, args.frames,
                                     tuple(args.size), args.seed, args.overwrite)
        elif args.keypoints:
            out = generate_keypoints(args.out, args.num_train, args.num_val, tuple(args.size),
                                     args.seed, args.overwrite)
        elif args.classification:
            out = generate_shape_classes(args.out, args.num_train, args.num_val,
                                         tuple(args.size), args.seed)
        else:
            out = generate_shapes(args.out, args.num_train, args.num_val, tuple(args.size),
                                  args.max_shapes, args.seed, args.overwrite)
    except (ValueError, FileExistsError) as err:
        parser.error(str(err))
    for name, path in out.items():
        print(f'{name}: {path}')


if __name__ == '__main__':
    main()
