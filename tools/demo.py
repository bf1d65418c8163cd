#!/usr/bin/env python
"""`make demo`: EVT end to end on a CPU, with no download.

1. generates (once) the "shapes" dataset in COCO and ADE20K layout under ``--data``;
2. trains a Mask R-CNN and a Semantic FPN with an EVT backbone through ``tools/train.py``
   (configs/demo/, which inherit the real configs);
3. evaluates both with ``tools/test.py`` (COCO bbox/segm mAP, mIoU), draws predictions on
   validation images and attention pictures (decay maps, token groups, attention rollout of
   the trained detector), and prints a summary table.

Every run writes into a new time-stamped directory under ``--work-dir``: nothing from an
earlier run is overwritten. ``--jsonl FILE`` also appends the summary to a records file
(``docs/records/demo.jsonl`` is what the docs' demo table is written from).
"""
import argparse
import json
import os
import os.path as osp
import re
import subprocess
import sys
import time

import numpy as np
from PIL import Image

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
DET_CFG = osp.join(REPO, 'configs', 'demo', 'mask-rcnn_evt-demo_fpn_shapes.py')
SEG_CFG = osp.join(REPO, 'configs', 'demo', 'fpn_evt-demo_shapes.py')
PROGRESS = re.compile(r'(Epoch|Iter)\((train|val|test)\)|copypaste|Saving checkpoint|^wrote ')


def run(args, log_path):
    """Run ``python args`` from the repo root, showing progress lines, logging all."""
    print('$ python ' + ' '.join(osp.relpath(a, REPO) if osp.isabs(a) else a for a in args),
          flush=True)
    lines = []
    with open(log_path, 'w') as log:
        proc = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            log.write(line)
            lines.append(line)
            m = PROGRESS.search(line)
            if m:
                print('   ' + line[m.start():].rstrip()[:140], flush=True)
        proc.wait()
    if proc.returncode:
        sys.exit(f'failed ({proc.returncode}); full log: {log_path}\n' + ''.join(lines[-30:]))
    return ''.join(lines)


def last_metrics(log: str, keys):
    out = {}
    for key in keys:
        found = re.findall(re.escape(key) + r':\s*(-?[\d.]+)', log)
        if not found:
            sys.exit(f'metric {key} not found in the test log')
        out[key] = float(found[-1])
    return out


def det_options(data_root: str) -> list:
    """``--cfg-options`` pointing the detection demo config at ``data_root``."""
    data = data_root.rstrip('/') + '/'
    ann = f'{data}annotations/instances_validation.json'
    return ['--cfg-options', f'data_root={data}'] + [
        f'{split}_dataloader.dataset.data_root={data}' for split in ('train', 'val', 'test')
    ] + [f'val_evaluator.ann_file={ann}', f'test_evaluator.ann_file={ann}']


def seg_options(data_root: str) -> list:
    """``--cfg-options`` pointing the segmentation demo config at ``data_root``."""
    data = data_root.rstrip('/') + '/'
    return ['--cfg-options'] + [
        f'{split}_dataloader.dataset.data_root={data}' for split in ('train', 'val', 'test')
    ]


def background_only_miou(data_root: str) -> float:
    """mIoU (in %) of a model predicting background everywhere, on the validation labels."""
    ann_dir = osp.join(data_root, 'annotations', 'validation')
    labels = np.concatenate([np.asarray(Image.open(osp.join(ann_dir, f))).ravel()
                             for f in sorted(os.listdir(ann_dir))])
    labels = labels[labels > 0]  # 0 is "ignore" under reduce_zero_label
    bg = (labels == 1).mean()  # IoU of background; every shape class has IoU 0
    return 100 * bg / 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--data', default=osp.join(REPO, 'data', 'demo'))
    parser.add_argument('--work-dir', default=osp.join(REPO, 'work_dirs', 'demo'))
    parser.add_argument('--num-train', type=int, default=400)
    parser.add_argument('--num-val', type=int, default=50)
    parser.add_argument('--det-epochs', type=int, default=10)
    parser.add_argument('--seg-iters', type=int, default=1200)
    parser.add_argument('--jsonl', help='append the summary to this JSON-lines records file')
    args = parser.parse_args()
    t0 = time.time()

    from mmevt.datasets import generate_shapes
    existed = osp.isfile(osp.join(args.data, 'shapes.json'))
    generate_shapes(args.data, args.num_train, args.num_val, img_size=(128, 128))
    print(f"[1/3] shapes dataset {'reused' if existed else 'generated'}: {args.data} "
          f'({args.num_train} train / {args.num_val} val images)', flush=True)

    work = osp.join(args.work_dir, time.strftime('%Y%m%d_%H%M%S'))
    os.makedirs(work)
    print(f'      results of this run: {work}', flush=True)
    det_opts, seg_opts = det_options(args.data), seg_options(args.data)

    print(f'[2/3] training Mask R-CNN (EVT) for {args.det_epochs} epochs', flush=True)
    det_dir = osp.join(work, 'mask_rcnn')
    run(['tools/train.py', DET_CFG, '--work-dir', det_dir] + det_opts +
        [f'train_cfg.max_epochs={args.det_epochs}', f'train_cfg.val_interval={args.det_epochs}'],
        osp.join(work, 'mask_rcnn_train.log'))
    print(f'      training Semantic FPN (EVT) for {args.seg_iters} iterations', flush=True)
    seg_dir = osp.join(work, 'sem_fpn')
    run(['tools/train.py', SEG_CFG, '--work-dir', seg_dir] + seg_opts +
        [f'train_cfg.max_iters={args.seg_iters}', f'train_cfg.val_interval={args.seg_iters}'],
        osp.join(work, 'sem_fpn_train.log'))

    print('[3/3] evaluating with tools/test.py and drawing predictions', flush=True)
    det_log = run(['tools/test.py', DET_CFG, osp.join(det_dir, f'epoch_{args.det_epochs}.pth'),
                   '--work-dir', osp.join(work, 'mask_rcnn_test'),
                   '--show-dir', osp.join(work, 'mask_rcnn_test', 'predictions')]
                  + det_opts, osp.join(work, 'mask_rcnn_test.log'))
    seg_log = run(['tools/test.py', SEG_CFG, osp.join(seg_dir, f'iter_{args.seg_iters}.pth'),
                   '--work-dir', osp.join(work, 'sem_fpn_test'),
                   '--show-dir', osp.join(work, 'sem_fpn_test', 'predictions')]
                  + seg_opts, osp.join(work, 'sem_fpn_test.log'))
    vis = osp.join(work, 'attention')
    img = osp.join(args.data, 'images', 'validation', '000000.jpg')
    for sub, extra in (('decay', ['--grid', '14', '14']),
                       ('groups', ['--img-size', '128', '128', '--group-size', '64']),
                       ('rollout', [DET_CFG, img, '--checkpoint',
                                    osp.join(det_dir, f'epoch_{args.det_epochs}.pth')])):
        run(['tools/visualization/visualize_attention.py', sub, *extra,
             '--out', osp.join(vis, f'{sub}.png')], osp.join(work, f'attention_{sub}.log'))
    det = last_metrics(det_log, ['coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP'])
    seg = last_metrics(seg_log, ['mIoU', 'mAcc', 'aAcc'])
    baseline = background_only_miou(args.data)

    summary = dict(det=det, seg=seg, background_only_mIoU=baseline,
                   minutes=(time.time() - t0) / 60, work_dir=work)
    with open(osp.join(work, 'summary.json'), 'w') as f:
        json.dump(summary, f, indent=1)
    if args.jsonl:
        import torch

        from mmevt.analysis.records import append_row, machine
        device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')  # the runner's
        append_row(args.jsonl, {k: v for k, v in summary.items() if k != 'work_dir'},
                   num_train=args.num_train, num_val=args.num_val, det_epochs=args.det_epochs,
                   seg_iters=args.seg_iters, **machine(device))
    sys.path.append(osp.join(osp.dirname(osp.abspath(__file__)), 'analysis'))
    from records_to_docs import demo_table  # the docs' table of it: project code, in tools/
    print('\n' + '\n'.join(demo_table(summary)))
    print(f"\npredictions drawn in {work}/*_test/predictions/, attention pictures in "
          f"{vis}/; total time {summary['minutes']:.1f} min")


if __name__ == '__main__':
    main()
