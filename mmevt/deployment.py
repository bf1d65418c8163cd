"""Export an mmevt classifier, backbone or segmentor to ONNX and check it with onnxruntime.

    python tools/deployment/pytorch2onnx.py CONFIG [CHECKPOINT] --shape 224 224 [--shape ...]
        [--backbone-only] [--out-dir DIR] [--overwrite] [--verify] [--benchmark N]

One ``.onnx`` file per ``--shape H W``, each with a dynamic batch dimension. The graph is
the model in ``tensor`` mode on an already normalised image (``B, 3, H, W``): a classifier
returns its logits ``(B, num_classes)``, a segmentor (e.g. Semantic FPN) the decode head's
logits ``(B, num_classes, H / 4, W / 4)``, ``--backbone-only`` the backbone's feature maps.
The data preprocessor (mean / std, BGR -> RGB) stays outside the graph; the tool prints it.

torch 2.14's ``torch.onnx.export`` is the dynamo exporter (``torch.export`` + onnxscript),
so this needs the ``onnx`` and ``onnxscript`` packages; ``--verify`` / ``--benchmark`` need
``onnxruntime``.

Why H and W are static: the stages cache their decay bias / group layout per grid size and
pad a last, partial group only when the grid needs it; both are decided in Python from the
concrete H and W, which ``torch.export`` cannot keep symbolic. Export one file per input size
instead (measured with torch 2.14.1: a dynamic batch with static H / W matches onnxruntime
to ~2e-5).
"""
import argparse
import importlib
import os
import os.path as osp
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from .apis.launch import config_toolkit
from .models.backbones.evt import MIN_INPUT_SIZE as MIN_SIZE  # four stride-2 levels
DYNAMIC_HW_ERROR = ('dynamic H / W cannot be exported: the stages choose their decay bias '
                    'cache and the padding of a partial last group from the concrete grid '
                    'size; export one file per input size (--shape H W, repeatable), each '
                    'with a dynamic batch')


class TensorMode(nn.Module):
    """The model's ``tensor`` mode as a plain ``forward(x)`` for ``torch.export``.

    Args:
        model (nn.Module): an mmpretrain classifier, an mmseg segmentor or a backbone.
        kind (str): ``'classifier'``, ``'segmentor'`` or ``'backbone'``.
    """

    def __init__(self, model: nn.Module, kind: str):
        super().__init__()
        self.model = model
        self.kind = kind

    def forward(self, x: Tensor):
        """Args: x (Tensor): ``(B, 3, H, W)`` normalised. Returns: Tensor or tuple."""
        if self.kind == 'backbone':
            return tuple(self.model(x))
        return self.model(x, mode='tensor')


def output_names(kind: str, num_outputs: int) -> List[str]:
    """ONNX output names: ``logits``, ``seg_logits`` or ``feat0``, ``feat1`` ..."""
    if kind == 'classifier':
        return ['logits']
    if kind == 'segmentor':
        return ['seg_logits']
    return [f'feat{i}' for i in range(num_outputs)]


def load_model(config: str, checkpoint: Optional[str] = None, backbone_only: bool = False,
               cfg_options: Optional[dict] = None) -> Tuple[nn.Module, str, dict]:
    """Build the model of ``config`` in eval mode on CPU (SyncBN reverted to BN).

    Args:
        config (str): an mmpretrain classification or mmseg segmentation config (any config
            whose ``model.backbone`` is buildable with ``backbone_only``).
        checkpoint (str, optional): a full-model checkpoint. Defaults to None (random
            weights: enough to check shapes and export, not to predict).
        backbone_only (bool): export ``model.backbone`` only. Defaults to False.
        cfg_options (dict, optional): overrides merged into the config. Defaults to None.

    Returns:
        tuple: the model, its kind (``'classifier'``, ``'segmentor'``, ``'backbone'``) and
        the data preprocessor's settings (``mean``, ``std``, ``bgr_to_rgb`` when present).
    """
    from mmengine.config import Config
    from mmengine.model import revert_sync_batchnorm
    from mmengine.registry import DefaultScope
    from mmengine.runner import load_checkpoint

    import mmevt  # noqa: F401  registers EVT; mmevt:: bases resolve
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    scope = config_toolkit(cfg, config)
    if scope == 'mmdet' and not backbone_only:
        raise ValueError(f'{config} is an mmdet detector: its post-processing (NMS, RoI '
                         'heads) needs mmdeploy; export the backbone with --backbone-only')
    model_cfg = cfg.model.copy()
    if 'data_preprocessor' not in model_cfg and 'data_preprocessor' in cfg:
        model_cfg['data_preprocessor'] = cfg.data_preprocessor
    with DefaultScope.overwrite_default_scope(scope):
        registry = importlib.import_module(f'{scope}.registry').MODELS
        model = registry.build(model_cfg)
    if checkpoint:
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    pre = model_cfg.get('data_preprocessor') or {}
    preprocess = {k: pre[k] for k in ('mean', 'std', 'bgr_to_rgb', 'to_rgb') if k in pre}
    kind = 'segmentor' if scope == 'mmseg' else 'classifier'
    if backbone_only:
        model, kind = model.backbone, 'backbone'
    return revert_sync_batchnorm(model).eval(), kind, preprocess


def check_shape(shape: Sequence[int]) -> Tuple[int, int]:
    """``(H, W)`` validated: two integers >= 32."""
    if len(shape) != 2 or any(int(s) != s or s < MIN_SIZE for s in shape):
        raise ValueError(f'--shape must be two integers H W >= {MIN_SIZE} (EVT has four '
                         f'stride-2 levels), got {list(shape)}')
    return int(shape[0]), int(shape[1])


def export_onnx(model: nn.Module, kind: str, shape: Sequence[int], out: str,
                overwrite: bool = False, dynamic_hw: bool = False) -> str:
    """Export one input size to ``out`` with a dynamic batch dimension.

    Args:
        model (nn.Module): from :func:`load_model` (eval mode).
        kind (str): ``'classifier'``, ``'segmentor'`` or ``'backbone'``.
        shape (Sequence[int]): ``(H, W)`` of the input.
        out (str): the ``.onnx`` file to write (atomically: a failed export leaves nothing).
        overwrite (bool): replace an existing ``out``. Defaults to False (refuse).
        dynamic_hw (bool): symbolic H and W. Defaults to False; True is refused (see the
            module docstring).

    Returns:
        str: ``out``.
    """
    if dynamic_hw:
        raise ValueError(DYNAMIC_HW_ERROR)
    h, w = check_shape(shape)
    if osp.exists(out) and not overwrite:
        raise FileExistsError(f'{out} exists; pass --overwrite to replace it')
    wrapper = TensorMode(model, kind).eval()
    x = torch.randn(2, 3, h, w)
    with torch.no_grad():
        outs = wrapper(x)
    n_out = len(outs) if isinstance(outs, (tuple, list)) else 1
    batch = torch.export.Dim('batch', min=1)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix='.onnx', dir=osp.dirname(osp.abspath(out)))
    os.close(fd)
    try:
        with torch.no_grad():
            torch.onnx.export(wrapper, (x, ), tmp, dynamo=True, external_data=False,
                              input_names=['input'], output_names=output_names(kind, n_out),
                              dynamic_shapes={'x': {0: batch}}, verbose=False)
        _check_dynamic_batch(tmp)
        os.replace(tmp, out)
    finally:
        if osp.exists(tmp):
            os.remove(tmp)
    return out


def _check_dynamic_batch(onnx_file: str) -> None:
    """Raise if the exported input's batch dimension is not symbolic.

    When ``torch.export``'s non-strict trace fails, ``torch.onnx.export`` retries in strict
    mode, which may specialise the dynamic dimensions to the example's sizes without an
    error (seen with torch 2.14.1 when H and W were asked to be dynamic).
    """
    import onnx
    dim = onnx.load(onnx_file, load_external_data=False).graph.input[0].type.tensor_type \
        .shape.dim[0]
    if not dim.dim_param:
        raise RuntimeError(f'the exporter fixed the batch dimension to {dim.dim_value}; '
                           'the model has a batch-dependent branch that torch.export '
                           'cannot keep symbolic')


def _as_list(outs) -> List[Tensor]:
    return list(outs) if isinstance(outs, (tuple, list)) else [outs]


def verify_onnx(onnx_file: str, model: nn.Module, kind: str, shape: Sequence[int],
                batches: Sequence[int] = (1, 2), atol: float = 1e-4, seed: int = 0) -> float:
    """Compare onnxruntime with PyTorch eager on random inputs of each batch size.

    Args:
        onnx_file (str): from :func:`export_onnx`.
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
            ref = _as_list(wrapper(x))
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


def time_against_onnxruntime(onnx_file: str, run_torch: Callable[[object], object],
                             rounds: int, warmup: int, threads: Optional[int] = None
                             ) -> Dict[str, float]:
    """Median latency of an onnxruntime session and of a PyTorch callable, same threads.

    The two alternate run by run, so that load from other processes on a shared machine
    falls on both alike.

    Args:
        onnx_file (str): the ONNX file.
        run_torch (Callable): ``run_torch(session)`` runs PyTorch once and returns a
            callable that runs onnxruntime once (built from the session).
        rounds (int): timed runs of each, after ``warmup`` untimed ones.
        warmup (int): untimed runs of each.
        threads (int, optional): intra-op threads of both. Defaults to torch's current
            setting.

    Returns:
        dict: ``ort_ms``, ``torch_ms`` (medians) and ``threads``.
    """
    import onnxruntime as ort
    before = torch.get_num_threads()
    threads = threads or before
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(onnx_file, opts, providers=['CPUExecutionProvider'])
    runs = run_torch(session)
    times: Dict[str, List[float]] = {k: [] for k in runs}
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            for i in range(warmup + rounds):
                for key, fn in runs.items():
                    t0 = time.perf_counter()
                    fn()
                    if i >= warmup:
                        times[key].append((time.perf_counter() - t0) * 1e3)
    finally:
        torch.set_num_threads(before)  # the caller's setting, not ours
    return dict({k: statistics.median(v) for k, v in times.items()}, threads=threads)


def benchmark(onnx_file: str, model: nn.Module, kind: str, shape: Sequence[int],
              rounds: int = 20, batch: int = 1, threads: Optional[int] = None
              ) -> Dict[str, float]:
    """Median CPU latency of onnxruntime and of PyTorch eager on the exported model.

    Args:
        onnx_file (str): from :func:`export_onnx`.
        model (nn.Module): the exported model.
        kind (str): its kind.
        shape (Sequence[int]): ``(H, W)``.
        rounds (int): timed runs of each (after 3 warm-up runs). Defaults to 20.
        batch (int): batch size. Defaults to 1.
        threads (int, optional): intra-op threads of both. Defaults to torch's current
            setting.

    Returns:
        dict: ``ort_ms``, ``torch_ms`` (medians) and ``threads``.
    """
    wrapper = TensorMode(model, kind).eval()
    x = torch.randn(batch, 3, *shape)

    def runs(session) -> Dict[str, Callable]:
        feeds = {session.get_inputs()[0].name: x.numpy()}
        return {'torch_ms': lambda: wrapper(x), 'ort_ms': lambda: session.run(None, feeds)}

    return time_against_onnxruntime(onnx_file, runs, rounds, 3, threads)


def default_name(config: str, kind: str, shape: Sequence[int]) -> str:
    """``<config stem>[_backbone]_<H>x<W>.onnx``."""
    stem = osp.splitext(osp.basename(config))[0]
    return f"{stem}{'_backbone' if kind == 'backbone' else ''}_{shape[0]}x{shape[1]}.onnx"


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
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
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> List[str]:
    """The command line; returns the written files."""
    args = parse_args(argv)
    shapes = [check_shape(s) for s in (args.shape or [[224, 224]])]
    if args.dynamic_hw:
        raise ValueError(DYNAMIC_HW_ERROR)
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
        if args.verify:
            diff = verify_onnx(out, model, kind, shape, atol=args.atol)
            print(f'verified {out}: max |onnxruntime - PyTorch| = {diff:.2e} at batch 1 and 2')
        if args.benchmark:
            r = benchmark(out, model, kind, shape, rounds=args.benchmark, threads=args.threads)
            print(f"latency {shape[0]}x{shape[1]} batch 1, {r['threads']} threads: "
                  f"onnxruntime {r['ort_ms']:.1f} ms, PyTorch eager {r['torch_ms']:.1f} ms "
                  f"(median of {args.benchmark})")
    return outs


def cli(argv: Optional[List[str]] = None) -> None:
    """:func:`main` with user errors as a one-line message and exit status 1."""
    try:
        main(argv)
    except (ValueError, FileExistsError, FileNotFoundError) as err:
        sys.exit(f'pytorch2onnx: error: {err}')


if __name__ == '__main__':
    cli()
