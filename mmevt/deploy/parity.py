"""Parity of an exported graph: onnxruntime against PyTorch running the same program.

- :func:`verify_onnx`: a file of torch's exporter (:mod:`mmevt.deploy.onnx_export`) against
  the model's ``tensor`` mode on random inputs, one absolute tolerance.
- :func:`verify_mmdeploy`: a file of mmdeploy (:mod:`mmevt.deploy.mmdeploy_export`) on a
  preprocessed image against two PyTorch references (:class:`Reference`), comparing what
  each family predicts (:func:`compare`): boxes, scores, labels and masks for detectors
  (matched as sets, :func:`match_detections`), the class map for segmentors, the class
  scores for classifiers, within :data:`TOLERANCES`. The graph's input is the image after
  the test pipeline and the data preprocessor (resized to the deploy config's
  ``input_shape``, normalised, padded); that preprocessing stays outside the graph, as in
  mmdeploy.
"""
import copy
import os.path as osp
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from ..toolkits import get_toolkit
from ..utils.lists import as_list
from .onnx_export import TensorMode
from .rewriters import mmdeploy_compat

# Largest differences verify_mmdeploy accepts between onnxruntime and PyTorch running the
# same program (measured parity is far below: docs/deployment.md). Boxes in pixels relative
# to the input's longer side; scores, mask probabilities (28 x 28 per detection) and class
# scores absolute; class maps as the fraction of pixels whose class differs.
TOLERANCES = dict(box=1e-4, score=1e-4, mask=1e-4, class_map=1e-3, probability=1e-4)


def verify_onnx(onnx_file: str, model: nn.Module, kind: str, shape: Sequence[int],
                batches: Sequence[int] = (1, 2), atol: float = 1e-4, seed: int = 0) -> float:
    """Compare onnxruntime with PyTorch eager on random inputs of each batch size.

    Args:
        onnx_file (str): from :func:`~mmevt.deploy.onnx_export.export_onnx`.
        model (nn.Module): the exported model.
        kind (str): its kind.
        shape (Sequence[int]): ``(H, W)`` of the export.
        batches (Sequence[int]): batch sizes to run (more than one checks the dynamic
            batch). Defaults to (1, 2).
        atol (float): largest allowed absolute difference. Defaults to 1e-4.
        seed (int): input seed. Defaults to 0.

    Returns:
        float: the largest absolute difference over all outputs and batches.
    """
    import onnxruntime as ort
    session = ort.InferenceSession(onnx_file, providers=['CPUExecutionProvider'])
    wrapper = TensorMode(model, kind).eval()
    gen = torch.Generator().manual_seed(seed)
    worst = 0.
    for b in batches:
        x = torch.randn(b, 3, *shape, generator=gen)
        with torch.no_grad():
            ref = as_list(wrapper(x))
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})
        if len(got) != len(ref):
            raise AssertionError(f'{onnx_file}: {len(got)} outputs, PyTorch gives {len(ref)}')
        for r, g in zip(ref, got):
            if tuple(g.shape) != tuple(r.shape):
                raise AssertionError(f'{onnx_file}: output shape {g.shape} at batch {b}, '
                                     f'PyTorch gives {tuple(r.shape)}')
            worst = max(worst, (torch.from_numpy(g) - r).abs().max().item())
    if worst > atol:
        raise AssertionError(f'{onnx_file}: onnxruntime differs from PyTorch by {worst:.3g} '
                             f'> {atol}')
    return worst


def read_images(img: str, batch: int) -> List[np.ndarray]:
    """``batch`` BGR images: ``img``, then its mirror image (so that a batch's items
    differ)."""
    import mmcv
    if not osp.isfile(img):
        raise FileNotFoundError(f'image {img!r} does not exist')
    first = mmcv.imread(img)
    return [first if i % 2 == 0 else np.ascontiguousarray(first[:, ::-1]) for i in range(batch)]


def copy_samples(samples: list) -> list:
    """Deep copies: the toolkits' predict methods write into the data samples."""
    return copy.deepcopy(samples)


class Reference:
    """The PyTorch model and one preprocessed batch, as the exported graph sees it.

    The model is built by mmdeploy's task processor, as its ``torch2onnx`` builds it.

    Args:
        deploy_cfg, model_cfg (Config): from :func:`~mmevt.deploy.mmdeploy_export.load_configs`.
        checkpoint (str, optional): as for :func:`~mmevt.deploy.mmdeploy_export.export_mmdeploy`
            (same ``seed``: same weights).
        images (list[np.ndarray]): BGR images, one per batch item.
        seed (int): torch seed before the model is built. Defaults to 0.
    """

    def __init__(self, deploy_cfg, model_cfg, checkpoint: Optional[str],
                 images: Sequence[np.ndarray], seed: int = 0):
        from mmdeploy.apis import build_task_processor
        from mmdeploy.utils import get_codebase, get_input_shape, get_ir_config
        self.deploy_cfg = deploy_cfg
        self.codebase = get_codebase(deploy_cfg).value
        self.task = get_toolkit(self.codebase).deploy_task
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
        :func:`~mmevt.deploy.rewriters.mmdeploy_compat`), eager, named like the graph's
        outputs."""
        from mmdeploy.core import RewriterContext, patch_model
        from mmdeploy.utils import IR, get_backend, get_ir_config
        backend = get_backend(self.deploy_cfg).value
        opset = get_ir_config(self.deploy_cfg).get('opset_version', 11)
        with mmdeploy_compat(), RewriterContext(cfg=self.deploy_cfg, backend=backend,
                                                ir=IR.ONNX, opset=opset):
            model = patch_model(self.model, cfg=self.deploy_cfg, backend=backend, ir=IR.ONNX)
            outs = model(self.inputs, copy_samples(self.data_samples), mode='predict')
        return {k: v.numpy() for k, v in zip(self.output_names, as_list(outs))}

    @torch.no_grad()
    def predict(self) -> Dict[str, np.ndarray]:
        """The toolkit's own PyTorch prediction at the input resolution, in the graph's
        layout: detectors ``dets`` ``(B, K, 5)`` (zero rows pad) and ``labels`` (masks are
        left out: the toolkit pastes them into the image); segmentors ``output``
        ``(B, 1, H, W)`` class indices; classifiers ``output`` ``(B, num_classes)`` scores.
        """
        if self.task == 'ObjectDetection':
            preds = [s.pred_instances for s in self.model.predict(
                self.inputs, copy_samples(self.data_samples), rescale=False)]
            k = max([len(p.scores) for p in preds] + [1])
            dets, labels = np.zeros((len(preds), k, 5), np.float32), np.zeros((len(preds), k))
            for b, p in enumerate(preds):
                dets[b, :len(p.scores)] = torch.cat([p.bboxes, p.scores[:, None]], 1).numpy()
                labels[b, :len(p.scores)] = p.labels.numpy()
            return dict(dets=dets, labels=labels)
        if self.task == 'Segmentation':
            # mmseg's whole inference: decode head logits resized to the input, arg-max
            metas = [dict(s.metainfo, img_shape=tuple(self.inputs.shape[2:]))
                     for s in self.data_samples]
            return dict(output=self.model.encode_decode(self.inputs, metas)
                        .argmax(dim=1, keepdim=True).numpy())
        preds = self.model.predict(self.inputs)
        return dict(output=torch.stack([p.pred_score for p in preds]).numpy())


def run_onnx(session, inputs: torch.Tensor) -> Dict[str, np.ndarray]:
    """Outputs of an onnxruntime session by name for the ``input`` batch."""
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: inputs.numpy()})))


def match_detections(ref: torch.Tensor, ref_labels: torch.Tensor, got: torch.Tensor,
                     got_labels: torch.Tensor, box_tol: float) -> List[Tuple[int, int]]:
    """Pairs ``(i, j)``: reference detection ``i`` and the same-label detection ``j`` whose
    box is closest (largest coordinate difference), when within ``box_tol``; each ``j`` is
    used once. Detections are compared as sets: near-equal scores may come in either order.

    Args:
        ref (Tensor): ``(N, 5)`` reference boxes and scores.
        ref_labels (Tensor): ``(N, )``.
        got (Tensor): ``(M, 5)`` onnxruntime's boxes and scores.
        got_labels (Tensor): ``(M, )``.
        box_tol (float): largest coordinate difference of a pair, in pixels.

    Returns:
        list: the pairs, in the reference's order.
    """
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


def compare(task: str, got: Dict[str, np.ndarray], ref: Dict[str, np.ndarray],
            input_hw: Sequence[int]) -> Dict[str, float]:
    """How far the ONNX outputs are from a reference in the graph's layout.

    Args:
        task (str): mmdeploy's task of the toolkit
            (:attr:`~mmevt.toolkits.base.Toolkit.deploy_task`): ``'ObjectDetection'``,
            ``'Segmentation'`` or ``'Classification'``.
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
    if task == 'Segmentation':
        return dict(class_map=float((got['output'] != ref['output']).mean()))
    if task == 'Classification':
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
        pairs = match_detections(rd, rl, gd, gl, box_tol)
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


def check_parity(stats: Dict[str, float]) -> None:
    """Raise ``RuntimeError`` when :func:`compare`'s numbers exceed :data:`TOLERANCES`
    (and for any unmatched detection or changed top-1 class)."""
    bad = {k: v for k, v in stats.items() if k in TOLERANCES and v > TOLERANCES[k]}
    for key in ('unmatched', 'top1'):
        if stats.get(key):
            bad[key] = stats[key]
    if bad:
        raise RuntimeError(f'onnxruntime differs from PyTorch: {bad} (tolerances '
                           f'{TOLERANCES}, unmatched detections and top-1 changes: none)')


def verify_mmdeploy(onnx_file: str, deploy_cfg, model_cfg, checkpoint: Optional[str],
                    img: str, seed: int = 0) -> Dict[str, Dict[str, float]]:
    """Compare mmdeploy's ``.onnx`` file in onnxruntime with PyTorch on ``img`` (and, for a
    dynamic batch, on a batch of 2: the image and its mirror image).

    Two references: ``graph``, the PyTorch model under mmdeploy's rewriters (the program
    that was exported: must match within :data:`TOLERANCES`), and ``toolkit``, the toolkit's
    own ``predict`` (reported; equal to ``graph`` for RetinaNet, segmentors and classifiers,
    while for two-stage detectors mmdeploy's RPN post-processing differs from mmdet's: NMS
    over all levels together instead of per level, no removal of empty proposals).

    Args:
        onnx_file (str): from :func:`~mmevt.deploy.mmdeploy_export.export_mmdeploy`.
        deploy_cfg, model_cfg (Config): the pair it was exported from.
        checkpoint (str, optional): the same checkpoint (None: the same random weights).
        img (str): the image compared.
        seed (int): the export's seed. Defaults to 0.

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
            stats = compare(ref.task, got, expected, ref.inputs.shape[2:])
            if name == 'graph':
                check_parity(stats)
            for k, v in stats.items():
                result[name][k] = v if batch == 1 else max(result[name][k], v)
    result['batches'] = list(batches)
    return result
