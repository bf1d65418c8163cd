"""Deploy an mmevt detector, segmentor or classifier with mmdeploy to ONNX Runtime.

    python tools/deployment/deploy.py DEPLOY_CONFIG MODEL_CONFIG [CHECKPOINT] [--img IMG]
        [--work-dir DIR] [--overwrite] [--verify] [--benchmark ROUNDS] [--threads N]

mmdeploy's own ``torch2onnx`` (its rewriters: ONNX ``NonMaxSuppression`` for the detectors'
post-processing, ``RoiAlign`` for the RoI heads, argmax for segmentors, softmax for
classifiers) run inside :func:`mmevt.mmdeploy_compat.mmdeploy_compat`, which makes mmdeploy
1.3.1 work on torch >= 2.9 (TorchScript exporter, the removed ``_cast_Long``, a correct
attention rewriter). The deploy configs are ours (``configs/deploy/``): ONNX Runtime, static
H / W, a dynamic batch only for classification.

``--verify`` runs the ``.onnx`` file in onnxruntime and the PyTorch model on the same
preprocessed image and compares what each family predicts (:func:`compare`): boxes, scores,
labels and masks for detectors, the class map for segmentors, the class scores for
classifiers. The graph's input is the image after the test pipeline and the data
preprocessor (resized to the deploy config's ``input_shape``, normalised, padded); that
preprocessing stays outside the graph, as in mmdeploy.

Why H and W are static: the stages cache their decay bias and group layout per grid size and
pad a last, partial group only when the grid needs it, all decided in Python from the
concrete size. The TorchScript exporter records those as constants of the traced size, so a
graph exported with dynamic H / W runs at other sizes but computes the wrong attention there;
the tool refuses such configs (:data:`DYNAMIC_HW_ERROR`).
"""
import argparse
import os
import os.path as osp
import shutil
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .apis.launch import config_toolkit
from .models.backbones.evt import MIN_INPUT_SIZE

DYNAMIC_HW_ERROR = (
    'dynamic H / W is refused: the stages choose their decay bias and the padding of a '
    'partial last group from the concrete grid size, which the TorchScript exporter bakes in '
    'as constants of the traced size, so the graph would run at other sizes with the wrong '
    'attention; use a static deploy config per input size (onnx_config.input_shape=[W, H]; '
    'a dynamic batch, axis 0, is allowed)')
# Largest differences --verify accepts between onnxruntime and PyTorch running the same
# program (measured parity is far below: docs/deployment.md). Boxes in pixels relative to
# the input's longer side; scores, mask probabilities (28 x 28 per detection) and class
# scores absolute; class maps as the fraction of pixels whose class differs.
TOLERANCES = dict(box=1e-4, score=1e-4, mask=1e-4, class_map=1e-3, probability=1e-4)


def default_image() -> str:
    """The photograph used when no ``--img`` is given: matplotlib's ``grace_hopper.jpg``."""
    from .analysis.attention_maps import sample_photo_path
    return sample_photo_path()


def load_configs(deploy_config: str, model_config: str,
                 cfg_options: Optional[dict] = None) -> Tuple[object, object]:
    """Read and check a deploy config and a model config.

    Args:
        deploy_config (str): an ONNX Runtime deploy config (``configs/deploy/``).
        model_config (str): an mmdet, mmseg or mmpretrain config of ours (or any config
            whose ``custom_imports`` load mmevt).
        cfg_options (dict, optional): overrides merged into the model config. Defaults to
            None.

    Returns:
        tuple: ``(deploy_cfg, model_cfg)`` as mmengine ``Config``.

    Raises:
        FileNotFoundError: a config file does not exist.
        ValueError: the pair cannot be deployed (see :func:`check_configs`).
    """
    for path in (deploy_config, model_config):
        if not osp.isfile(path):
            raise FileNotFoundError(f'config file {path!r} does not exist')
    import mmevt  # noqa: F401  registers EVT; mmevt:: bases resolve
    from mmdeploy.utils import load_config
    deploy_cfg, model_cfg = load_config(deploy_config, model_config)
    if cfg_options:
        model_cfg.merge_from_dict(cfg_options)
    check_configs(deploy_cfg, model_cfg)
    return deploy_cfg, model_cfg


def check_configs(deploy_cfg, model_cfg) -> None:
    """Raise ``ValueError`` naming the bad value when the pair cannot be deployed here.

    Checked: ONNX Runtime backend and ONNX IR; the deploy config's codebase is the model
    config's toolkit; no dynamic H / W; ``input_shape`` two integers >= 32; detectors with a
    mask head use an instance-segmentation config (``masks`` output) and only they do.
    """
    from mmdeploy.utils import (get_backend, get_codebase, get_ir_config, get_input_shape,
                                is_dynamic_shape)
    backend = get_backend(deploy_cfg).value
    if backend != 'onnxruntime':
        raise ValueError(f"backend_config.type must be 'onnxruntime', got {backend!r}")
    ir = get_ir_config(deploy_cfg).get('type')
    if ir != 'onnx':
        raise ValueError(f"onnx_config.type must be 'onnx', got {ir!r}")
    scope = config_toolkit(model_cfg, 'the model config')
    codebase = get_codebase(deploy_cfg).value
    if codebase != scope:
        raise ValueError(f'the deploy config is for {codebase!r} (codebase_config.type) but '
                         f'the model config is an {scope!r} config')
    if is_dynamic_shape(deploy_cfg):
        raise ValueError(DYNAMIC_HW_ERROR)
    shape = get_input_shape(deploy_cfg)
    if shape is not None and (len(shape) != 2 or any(
            not isinstance(s, int) or s < MIN_INPUT_SIZE for s in shape)):
        raise ValueError(f'onnx_config.input_shape must be [W, H], two integers >= '
                         f'{MIN_INPUT_SIZE} (EVT has four stride-2 levels), got {shape}')
    if scope == 'mmdet':
        has_mask = bool(model_cfg.model.get('roi_head', {}).get('mask_head'))
        wants_mask = 'masks' in get_ir_config(deploy_cfg)['output_names']
        if has_mask != wants_mask:
            need = 'an instance-seg' if has_mask else 'a detection'
            raise ValueError(f'{model_cfg.model.type} {"has" if has_mask else "has no"} mask '
                             f'head: use {need} deploy config (output_names '
                             f'{get_ir_config(deploy_cfg)["output_names"]} given)')


def export(deploy_cfg, model_cfg, checkpoint: Optional[str], img: str, work_dir: str,
           overwrite: bool = False, seed: int = 0) -> str:
    """mmdeploy's ``torch2onnx`` under :func:`~mmevt.mmdeploy_compat.mmdeploy_compat`.

    Args:
        deploy_cfg, model_cfg (Config): from :func:`load_configs`.
        checkpoint (str, optional): full-model checkpoint; None: random weights drawn with
            ``seed`` (enough to check the export, not to predict).
        img (str): the image traced through the model.
        work_dir (str): where ``onnx_config.save_file`` (``end2end.onnx``) is written.
        overwrite (bool): replace an existing file. Defaults to False (refuse).
        seed (int): torch seed before the model is built. Defaults to 0.

    Returns:
        str: the ``.onnx`` file, written atomically (a failed export leaves nothing).
    """
    from mmdeploy.apis import torch2onnx
    from mmdeploy.utils import get_ir_config

    from .mmdeploy_compat import mmdeploy_compat
    save_file = get_ir_config(deploy_cfg)['save_file']
    out = osp.join(work_dir, save_file)
    if osp.exists(out) and not overwrite:
        raise FileExistsError(f'{out} exists; pass --overwrite to replace it')
    os.makedirs(work_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.deploy-', dir=work_dir)
    try:
        with mmdeploy_compat():
            torch.manual_seed(seed)
            torch2onnx(img, tmp, save_file, deploy_cfg, model_cfg, checkpoint, device='cpu')
        os.replace(osp.join(tmp, save_file), out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def read_images(img: str, batch: int) -> List[np.ndarray]:
    """``batch`` BGR images: ``img``, then its mirror image (so that a batch's items
    differ)."""
    import mmcv
    if not osp.isfile(img):
        raise FileNotFoundError(f'image {img!r} does not exist')
    first = mmcv.imread(img)
    return [first if i % 2 == 0 else np.ascontiguousarray(first[:, ::-1]) for i in range(batch)]


class Reference:
    """The PyTorch model and one preprocessed batch, as the exported graph sees it.

    Args:
        deploy_cfg, model_cfg (Config): from :func:`load_configs`.
        checkpoint (str, optional): as for :func:`export` (same ``seed``: same weights).
        images (list[np.ndarray]): BGR images, one per batch item.
        seed (int): torch seed before the model is built. Defaults to 0.
    """

    def __init__(self, deploy_cfg, model_cfg, checkpoint: Optional[str],
                 images: Sequence[np.ndarray], seed: int = 0):
        from mmdeploy.apis import build_task_processor
        from mmdeploy.utils import get_codebase, get_input_shape, get_ir_config
        self.deploy_cfg = deploy_cfg
        self.codebase = get_codebase(deploy_cfg).value
        self.output_names = list(get_ir_config(deploy_cfg)['output_names'])
        processor = build_task_processor(model_cfg, deploy_cfg, 'cpu')
        torch.manual_seed(seed)
        self.model = processor.build_pytorch_model(checkpoint)
        data, self.inputs = processor.create_input(
            list(images), get_input_shape(deploy_cfg),
            data_preprocessor=self.model.data_preprocessor)
        self.data_samples = data['data_samples']

    @torch.no_grad()
    def traced(self) -> Dict[str, np.ndarray]:
        """What the graph computes, run by PyTorch: the model under mmdeploy's rewriters (and
        :func:`~mmevt.mmdeploy_compat.mmdeploy_compat`), eager, named like the graph's
        outputs."""
        from mmdeploy.core import RewriterContext, patch_model
        from mmdeploy.utils import IR, get_backend, get_ir_config

        from .mmdeploy_compat import mmdeploy_compat
        backend = get_backend(self.deploy_cfg).value
        opset = get_ir_config(self.deploy_cfg).get('opset_version', 11)
        with mmdeploy_compat(), RewriterContext(cfg=self.deploy_cfg, backend=backend,
                                                ir=IR.ONNX, opset=opset):
            model = patch_model(self.model, cfg=self.deploy_cfg, backend=backend, ir=IR.ONNX)
            outs = model(self.inputs, copy_samples(self.data_samples), mode='predict')
        outs = outs if isinstance(outs, (tuple, list)) else [outs]
        return {k: v.numpy() for k, v in zip(self.output_names, outs)}

    @torch.no_grad()
    def predict(self) -> Dict[str, np.ndarray]:
        """The toolkit's own PyTorch prediction at the input resolution, in the graph's
        layout: detectors ``dets`` ``(B, K, 5)`` (zero rows pad) and ``labels`` (masks are
        left out: the toolkit pastes them into the image); segmentors ``output``
        ``(B, 1, H, W)`` class indices; classifiers ``output`` ``(B, num_classes)`` scores.
        """
        if self.codebase == 'mmdet':
            preds = [s.pred_instances for s in self.model.predict(
                self.inputs, copy_samples(self.data_samples), rescale=False)]
            k = max([len(p.scores) for p in preds] + [1])
            dets, labels = np.zeros((len(preds), k, 5), np.float32), np.zeros((len(preds), k))
            for b, p in enumerate(preds):
                dets[b, :len(p.scores)] = torch.cat([p.bboxes, p.scores[:, None]], 1).numpy()
                labels[b, :len(p.scores)] = p.labels.numpy()
            return dict(dets=dets, labels=labels)
        if self.codebase == 'mmseg':
            # mmseg's whole inference: decode head logits resized to the input, arg-max
            metas = [dict(s.metainfo, img_shape=tuple(self.inputs.shape[2:]))
                     for s in self.data_samples]
            return dict(output=self.model.encode_decode(self.inputs, metas)
                        .argmax(dim=1, keepdim=True).numpy())
        preds = self.model.predict(self.inputs)
        return dict(output=torch.stack([p.pred_score for p in preds]).numpy())


def copy_samples(samples: list) -> list:
    """Deep copies: the toolkits' predict methods write into the data samples."""
    import copy
    return copy.deepcopy(samples)


def run_onnx(session, inputs: torch.Tensor) -> Dict[str, np.ndarray]:
    """Outputs of an onnxruntime session by name for the ``input`` batch."""
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: inputs.numpy()})))


def _match_detections(ref: torch.Tensor, ref_labels: torch.Tensor, got: torch.Tensor,
                      got_labels: torch.Tensor, box_tol: float) -> List[Tuple[int, int]]:
    """Pairs ``(i, j)``: reference detection ``i`` and the same-label detection ``j`` whose
    box is closest (largest coordinate difference), when within ``box_tol``; each ``j`` is
    used once. Detections are compared as sets: near-equal scores may come in either order."""
    pairs, used = [], set()
    for i in range(len(ref)):
        cands = [j for j in range(len(got)) if j not in used and got_labels[j] == ref_labels[i]]
        if not cands:
            continue
        diffs = [(got[j, :4] - ref[i, :4]).abs().max().item() for j in cands]
        best = int(np.argmin(diffs))
        if diffs[best] <= box_tol:
            pairs.append((i, cands[best]))
            used.add(cands[best])
    return pairs


def compare(codebase: str, got: Dict[str, np.ndarray], ref: Dict[str, np.ndarray],
            input_hw: Sequence[int]) -> Dict[str, float]:
    """How far the ONNX outputs are from a reference in the graph's layout.

    Args:
        codebase (str): ``'mmdet'``, ``'mmseg'`` or ``'mmpretrain'``.
        got (dict): :func:`run_onnx`'s outputs.
        ref (dict): :meth:`Reference.traced` or :meth:`Reference.predict`.
        input_hw (Sequence[int]): ``(H, W)`` of the graph's input.

    Returns:
        dict: detectors: ``detections`` (the reference's count), ``matched`` (pairs of the
        same label with boxes within the tolerance), ``unmatched`` (detections of either side
        without a partner, except those scoring below the other side's last one when that
        side filled all ``max_per_img`` slots), ``degenerate`` (unmatched ONNX boxes of zero
        width or height: mmdeploy's post-processing keeps them, mmdet's drops them), ``box``
        (largest coordinate difference / the input's longer side), ``score``, and when both
        have masks ``mask`` (largest difference of the 28 x 28 mask probabilities);
        segmentors ``class_map`` (fraction of pixels whose class differs); classifiers
        ``probability`` (largest score difference) and ``top1`` (fraction that differ).
    """
    if codebase == 'mmseg':
        return dict(class_map=float((got['output'] != ref['output']).mean()))
    if codebase == 'mmpretrain':
        return dict(probability=float(np.abs(got['output'] - ref['output']).max()),
                    top1=float((got['output'].argmax(1) != ref['output'].argmax(1)).mean()))
    side = float(max(input_hw))
    box_tol, score_tol = TOLERANCES['box'] * side, TOLERANCES['score']
    cap = got['dets'].shape[1]  # keep_top_k = the model's max_per_img, as in PyTorch
    stats = dict(detections=0, matched=0, unmatched=0, degenerate=0, box=0., score=0.)
    with_masks = 'masks' in got and 'masks' in ref
    if with_masks:
        stats['mask'] = 0.
    for b in range(len(ref['dets'])):
        sides = []
        for out in (ref, got):
            keep = out['dets'][b, :, 4] > 0  # mmdeploy pads with zero-score rows
            sides.append([torch.from_numpy(out[k][b][keep]) for k in out if k != 'output'])
        (rd, rl, *rm), (gd, gl, *gm) = sides
        pairs = _match_detections(rd, rl, gd, gl, box_tol)
        stats['detections'] += len(rd)
        stats['matched'] += len(pairs)
        # a side that filled all `cap` slots dropped what scored below its last one
        ort_cut = gd[:, 4].min().item() if len(gd) >= cap else float('-inf')
        ref_cut = rd[:, 4].min().item() if len(rd) >= cap else float('-inf')
        done_r, done_g = {i for i, _ in pairs}, {j for _, j in pairs}
        stats['unmatched'] += sum(1 for i in range(len(rd))
                                  if i not in done_r and rd[i, 4] > ort_cut + score_tol)
        for j in range(len(gd)):
            if j in done_g or gd[j, 4] <= ref_cut + score_tol:
                continue
            flat = bool((gd[j, 2:4] <= gd[j, :2]).any())
            stats['degenerate' if flat else 'unmatched'] += 1
        for i, j in pairs:
            stats['box'] = max(stats['box'], (gd[j, :4] - rd[i, :4]).abs().max().item() / side)
            stats['score'] = max(stats['score'], abs(gd[j, 4] - rd[i, 4]).item())
            if with_masks:
                stats['mask'] = max(stats['mask'], (gm[0][j] - rm[0][i]).abs().max().item())
    return stats


def check_parity(codebase: str, stats: Dict[str, float]) -> None:
    """Raise ``RuntimeError`` when :func:`compare`'s numbers exceed :data:`TOLERANCES`
    (and for any unmatched detection or changed top-1 class)."""
    bad = {k: v for k, v in stats.items() if k in TOLERANCES and v > TOLERANCES[k]}
    for key in ('unmatched', 'top1'):
        if stats.get(key):
            bad[key] = stats[key]
    if bad:
        raise RuntimeError(f'onnxruntime differs from PyTorch: {bad} (tolerances '
                           f'{TOLERANCES}, unmatched detections and top-1 changes: none)')


def verify(onnx_file: str, deploy_cfg, model_cfg, checkpoint: Optional[str], img: str,
           seed: int = 0) -> Dict[str, Dict[str, float]]:
    """Compare the ``.onnx`` file in onnxruntime with PyTorch on ``img`` (and, for a
    dynamic batch, on a batch of 2: the image and its mirror image).

    Two references: ``graph``, the PyTorch model under mmdeploy's rewriters (the program
    that was exported: must match within :data:`TOLERANCES`), and ``toolkit``, the toolkit's
    own ``predict`` (reported; equal to ``graph`` for RetinaNet, segmentors and classifiers,
    while for two-stage detectors mmdeploy's RPN post-processing differs from mmdet's: NMS
    over all levels together instead of per level, no removal of empty proposals).

    Returns:
        dict: ``graph`` and ``toolkit``: :func:`compare`'s numbers, worst over the batch
        sizes; ``batches``: the batch sizes run.

    Raises:
        RuntimeError: a ``graph`` difference above :data:`TOLERANCES`.
    """
    import onnxruntime as ort
    from mmdeploy.utils import is_dynamic_batch
    session = ort.InferenceSession(onnx_file, providers=['CPUExecutionProvider'])
    batches = (1, 2) if is_dynamic_batch(deploy_cfg) else (1, )
    result: Dict[str, Dict[str, float]] = dict(graph={}, toolkit={})
    for batch in batches:
        ref = Reference(deploy_cfg, model_cfg, checkpoint, read_images(img, batch), seed)
        got = run_onnx(session, ref.inputs)
        for name, expected in (('graph', ref.traced()), ('toolkit', ref.predict())):
            stats = compare(ref.codebase, got, expected, ref.inputs.shape[2:])
            if name == 'graph':
                check_parity(ref.codebase, stats)
            for k, v in stats.items():
                result[name][k] = v if batch == 1 else max(result[name][k], v)
    result['batches'] = list(batches)
    return result


def benchmark(onnx_file: str, ref: Reference, rounds: int = 10,
              threads: Optional[int] = None) -> Dict[str, float]:
    """Median CPU latency of onnxruntime and of PyTorch on the same batch, same threads
    (:func:`mmevt.deployment.time_against_onnxruntime`: the two alternate run by run).

    PyTorch's time is its ``predict`` as in :meth:`Reference.predict` (model and
    post-processing, no data pipeline), onnxruntime's the graph.

    Returns:
        dict: ``ort_ms``, ``torch_ms`` (medians of ``rounds`` after 2 warm-up runs) and
        ``threads``.
    """
    from .deployment import time_against_onnxruntime

    def runs(session) -> Dict[str, Callable]:
        return {'torch_ms': ref.predict, 'ort_ms': lambda: run_onnx(session, ref.inputs)}

    return time_against_onnxruntime(onnx_file, runs, rounds, 2, threads)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
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
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='overrides of the model config')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> str:
    """The command line; returns the written ``.onnx`` file."""
    args = parse_args(argv)
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
    out = export(deploy_cfg, model_cfg, args.checkpoint, img, work_dir, args.overwrite,
                 args.seed)
    print(f'deploy: wrote {out}')
    if args.verify:
        result = verify(out, deploy_cfg, model_cfg, args.checkpoint, img, args.seed)
        for name, what in (('graph', 'PyTorch under mmdeploy\'s rewriters'),
                           ('toolkit', f'{model_cfg.default_scope}\'s own predict')):
            print(f'onnxruntime vs {what}: ' + ', '.join(
                f'{k} {v:.3g}' if isinstance(v, float) else f'{k} {v}'
                for k, v in result[name].items()))
        print(f"verified at batch {result['batches']}")
        if result['graph'].get('detections') == 0:
            print('note: no detections above the score threshold on this image, so boxes and '
                  'masks were not compared (random weights? pass a checkpoint)')
    if args.benchmark:
        ref = Reference(deploy_cfg, model_cfg, args.checkpoint, read_images(img, 1), args.seed)
        t = benchmark(out, ref, args.benchmark, args.threads)
        print(f"latency at {tuple(ref.inputs.shape[2:])}, {t['threads']} thread(s), median "
              f"of {args.benchmark}: onnxruntime {t['ort_ms']:.1f} ms, PyTorch "
              f"{t['torch_ms']:.1f} ms")
    return out


def cli(argv: Optional[List[str]] = None) -> None:
    """:func:`main` with user errors as a one-line message and exit status 1."""
    try:
        main(argv)
    except (ValueError, FileExistsError, FileNotFoundError) as err:
        sys.exit(f'deploy: error: {err}')


if __name__ == '__main__':
    cli()
