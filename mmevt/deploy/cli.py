"""The two deployment command lines: ``mmevt-onnx`` and ``mmevt-deploy``.

    python tools/deployment/pytorch2onnx.py CONFIG [CHECKPOINT] --shape 224 224 [--shape ...]
        [--backbone-only] [--out-dir DIR] [--overwrite] [--verify] [--benchmark N] [--jsonl F]

exports with torch's own exporter (:mod:`mmevt.deploy.onnx_export`), one file per input size;

    python tools/deployment/deploy.py DEPLOY_CONFIG MODEL_CONFIG [CHECKPOINT] [--img IMG]
        [--work-dir DIR] [--overwrite] [--verify] [--benchmark ROUNDS] [--threads N] [--jsonl F]

deploys with mmdeploy (:mod:`mmevt.deploy.mmdeploy_export`). ``--verify`` is
:mod:`mmevt.deploy.parity`, ``--benchmark`` :mod:`mmevt.deploy.timing`. User errors end
either with a one-line message and exit status 1. ``--jsonl`` appends what was measured (one
row per file) to a records file, as the docs' tables are written from
(``tools/analysis/records_to_docs.py``).
"""
import argparse
import os.path as osp
import time
from typing import Dict, List, Optional

import torch

from ..analysis.records import append_row, cpu_model, package_versions
from ..utils.user_errors import exit_on_user_error
from .mmdeploy_export import default_image, export_mmdeploy, load_configs
from .onnx_export import default_name, export_onnx, load_model
from .parity import Reference, read_images, verify_mmdeploy, verify_onnx
from .shapes import ONNX_DYNAMIC_HW_ERROR, check_shape
from .timing import time_predict, time_tensor_mode


JSONL_HELP = ('append what --verify / --benchmark measured to this JSON-lines records file '
              '(docs/records/: tools/analysis/records_to_docs.py writes the docs from it)')


def _as_given(path: str) -> str:
    """``path`` relative to the working directory (the repository root, run as the docs
    show), so records of the same file from two runs name it alike."""
    return osp.normpath(osp.relpath(path) if osp.isabs(path) else path)


def record(path: Optional[str], config: str, **measured) -> None:
    """Append one row to the records file ``path`` (None: nothing).

    Args:
        path (str, optional): the JSON-lines file (``--jsonl``).
        config (str): the model config.
        **measured: what was measured (``threads`` among them where timed).

    The row names the CPU (its threads are the ``threads`` column), torch, onnxruntime and
    mmdeploy.
    """
    versions = package_versions(('onnxruntime', 'mmdeploy'))
    append_row(path, dict(measured, device=f'CPU ({cpu_model()})', torch=torch.__version__,
                          onnxruntime=versions['onnxruntime'], mmdeploy=versions['mmdeploy']),
               config=_as_given(config))


# ------------------------------------------------------------------ mmevt-onnx
def parse_onnx_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """``mmevt-onnx``'s options."""
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description='Export an mmevt classifier, backbone or '
                                     'segmentor to ONNX (one file per input size, dynamic '
                                     'batch).')
    parser.add_argument('config')
    parser.add_argument('checkpoint', nargs='?', help='full-model checkpoint (default: '
                        'random weights, for checking the export only)')
    parser.add_argument('--shape', type=int, nargs=2, action='append', metavar=('H', 'W'),
                        help='input size; repeat for several files (default: 224 224)')
    parser.add_argument('--backbone-only', action='store_true',
                        help='export model.backbone (multi-scale feature maps)')
    parser.add_argument('--out-dir', default='work_dirs/onnx')
    parser.add_argument('--overwrite', action='store_true', help='replace existing files')
    parser.add_argument('--dynamic-hw', action='store_true',
                        help='symbolic H / W: not exportable, explains why and stops')
    parser.add_argument('--verify', action='store_true',
                        help='compare onnxruntime with PyTorch at batch 1 and 2')
    parser.add_argument('--atol', type=float, default=1e-4)
    parser.add_argument('--benchmark', type=int, default=0, metavar='ROUNDS',
                        help='median CPU latency of onnxruntime and PyTorch eager, batch 1')
    parser.add_argument('--threads', type=int, help='intra-op threads for --benchmark')
    parser.add_argument('--jsonl', help=JSONL_HELP)
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    return parser.parse_args(argv)


def onnx_main(argv: Optional[List[str]] = None) -> List[str]:
    """``mmevt-onnx``; returns the written files."""
    args = parse_onnx_args(argv)
    shapes = [check_shape(s) for s in (args.shape or [[224, 224]])]
    if args.dynamic_hw:
        raise ValueError(ONNX_DYNAMIC_HW_ERROR)
    kind = 'backbone' if args.backbone_only else 'model'
    outs = [osp.join(args.out_dir, default_name(args.config, kind, s)) for s in shapes]
    taken = [o for o in outs if osp.exists(o)]
    if taken and not args.overwrite:  # before loading anything
        raise FileExistsError(f'{taken} exist; pass --overwrite to replace them')
    model, kind, preprocess = load_model(args.config, args.checkpoint, args.backbone_only,
                                         args.cfg_options)
    if not args.checkpoint:
        print('no checkpoint: exporting random weights (shapes and parity only)')
    print(f'{kind}; the graph takes normalised input, preprocess outside it: {preprocess}')
    for shape, out in zip(shapes, outs):
        t0 = time.perf_counter()
        export_onnx(model, kind, shape, out, overwrite=args.overwrite)
        print(f'wrote {out} (input: batch x 3 x {shape[0]} x {shape[1]}, batch dynamic) in '
              f'{time.perf_counter() - t0:.1f} s')
        measured: Dict = {}
        if args.verify:
            diff = verify_onnx(out, model, kind, shape, atol=args.atol)
            print(f'verified {out}: max |onnxruntime - PyTorch| = {diff:.2e} at batch 1 and 2')
            measured['max_abs_diff'] = diff
        if args.benchmark:
            r = time_tensor_mode(out, model, kind, shape, rounds=args.benchmark,
                                 threads=args.threads)
            print(f"latency {shape[0]}x{shape[1]} batch 1, {r['threads']} threads: "
                  f"onnxruntime {r['ort_ms']:.1f} ms, PyTorch eager {r['torch_ms']:.1f} ms "
                  f"(median of {args.benchmark})")
            measured.update(r, rounds=args.benchmark)
        if measured:
            record(args.jsonl, args.config, kind=kind, shape=list(shape), **measured)
    return outs


def onnx_cli(argv: Optional[List[str]] = None) -> None:
    """``mmevt-onnx`` (``tools/deployment/pytorch2onnx.py``): :func:`onnx_main` with user
    errors as a one-line message and exit status 1."""
    exit_on_user_error(onnx_main, 'pytorch2onnx', argv)


# ------------------------------------------------------------------ mmevt-deploy
def parse_deploy_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """``mmevt-deploy``'s options."""
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description='Deploy an mmevt model with mmdeploy to ONNX '
                                     'Runtime (configs/deploy/), check it against PyTorch.')
    parser.add_argument('deploy_config', help='e.g. configs/deploy/mmdet/'
                        'instance-seg_onnxruntime_static-800x1344.py')
    parser.add_argument('model_config')
    parser.add_argument('checkpoint', nargs='?', help='full-model checkpoint (default: random '
                        'weights drawn with --seed, for checking the export only)')
    parser.add_argument('--img', help="image traced and compared (default: matplotlib's "
                        'grace_hopper.jpg)')
    parser.add_argument('--work-dir', help='default: work_dirs/deploy/<model config name>')
    parser.add_argument('--overwrite', action='store_true', help='replace an existing file')
    parser.add_argument('--verify', action='store_true',
                        help='compare onnxruntime with PyTorch on --img')
    parser.add_argument('--benchmark', type=int, default=0, metavar='ROUNDS',
                        help='median CPU latency of onnxruntime and PyTorch, batch 1')
    parser.add_argument('--threads', type=int, help='intra-op threads for --benchmark')
    parser.add_argument('--seed', type=int, default=0, help='seed of random weights')
    parser.add_argument('--jsonl', help=JSONL_HELP)
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='overrides of the model config')
    return parser.parse_args(argv)


def deploy_main(argv: Optional[List[str]] = None) -> str:
    """``mmevt-deploy``; returns the written ``.onnx`` file."""
    args = parse_deploy_args(argv)
    if args.benchmark < 0 or (args.threads is not None and args.threads < 1):
        raise ValueError(f'--benchmark must be >= 0 and --threads >= 1, got '
                         f'{args.benchmark} and {args.threads}')
    img = args.img or default_image()
    if not osp.isfile(img):
        raise FileNotFoundError(f'image {img!r} does not exist')
    work_dir = args.work_dir or osp.join(
        'work_dirs', 'deploy', osp.splitext(osp.basename(args.model_config))[0])
    deploy_cfg, model_cfg = load_configs(args.deploy_config, args.model_config,
                                         args.cfg_options)
    out = export_mmdeploy(deploy_cfg, model_cfg, args.checkpoint, img, work_dir,
                          args.overwrite, args.seed)
    print(f'deploy: wrote {out}')
    measured: Dict = {}
    if args.verify:
        result = verify_mmdeploy(out, deploy_cfg, model_cfg, args.checkpoint, img, args.seed)
        for name, what in (('graph', 'PyTorch under mmdeploy\'s rewriters'),
                           ('toolkit', f'{model_cfg.default_scope}\'s own predict')):
            print(f'onnxruntime vs {what}: ' + ', '.join(
                f'{k} {v:.3g}' if isinstance(v, float) else f'{k} {v}'
                for k, v in result[name].items()))
        print(f"verified at batch {result['batches']}")
        if result['graph'].get('detections') == 0:
            print('note: no detections above the score threshold on this image, so boxes and '
                  'masks were not compared (random weights? pass a checkpoint)')
        measured.update(result)
    if args.benchmark:
        ref = Reference(deploy_cfg, model_cfg, args.checkpoint, read_images(img, 1), args.seed)
        t = time_predict(out, ref, args.benchmark, args.threads)
        print(f"latency at {tuple(ref.inputs.shape[2:])}, {t['threads']} thread(s), median "
              f"of {args.benchmark}: onnxruntime {t['ort_ms']:.1f} ms, PyTorch "
              f"{t['torch_ms']:.1f} ms")
        measured.update(t, rounds=args.benchmark, shape=list(ref.inputs.shape[2:]))
    if measured:
        record(args.jsonl, args.model_config, deploy_config=_as_given(args.deploy_config),
               seed=args.seed, checkpoint=args.checkpoint,
               cfg_options=dict(args.cfg_options or {}), **measured)
    return out


def deploy_cli(argv: Optional[List[str]] = None) -> None:
    """``mmevt-deploy`` (``tools/deployment/deploy.py``): :func:`deploy_main` with user
    errors as a one-line message and exit status 1."""
    exit_on_user_error(deploy_main, 'deploy', argv)
