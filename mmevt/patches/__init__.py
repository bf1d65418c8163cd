"""Every change mmevt makes to another library, listed in :data:`PATCHES`.

``import mmevt`` applies the ones marked ``when='import'`` (:func:`apply_import_patches`),
except those switched off by name in the environment variable ``MMEVT_PATCHES``
(:data:`SWITCH_ENV`, e.g. ``MMEVT_PATCHES=-atomic-local-writes,-flop-handles``), read at
import so that dataloader workers and launched processes inherit it. The mmdeploy fixes
apply only inside :func:`mmevt.deploy.rewriters.mmdeploy_compat`, i.e. while
``mmevt-deploy`` runs, and the ``pkg_resources`` stand-in only while our ``vis_cam.py``
loads mmpretrain's. ``python -m mmevt.info`` prints the installed stack and this table,
with what is applied in that process, for bug reports.

Each entry also says what changes for code that is not EVT's (``others``): a user's other
models, files and checkpoints in the same process.

Each entry says what it fixes and on which stack it is needed: upstream OpenMMLab (mmengine
0.10.7, mmdeploy 1.3.1) and the onedl fork (onedl-mmengine 0.10.12) share most of these
bugs; where the fork differs, the entry says how.
"""
import contextlib
import os
import warnings
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from . import (atomic_writes, checkpoint_loading, config_resolution, cpu_distributed,
               flop_handles, param_groups)


class Patch(NamedTuple):
    """One change to another library."""
    name: str
    home: str  # the mmevt module that holds it
    replaces: Tuple[str, ...]  # what is replaced or extended, as module.attribute
    fixes: str
    upstream: str  # on the upstream stack
    fork: str  # on the onedl fork
    reference: str  # upstream issue / PR, or where it was found
    when: str  # 'import' (import mmevt), else the tool inside which it applies
    apply: Optional[Callable[[], None]] = None
    others: str = 'nothing: it applies only inside that tool'  # what changes for other code


PATCHES: Tuple[Patch, ...] = (
    Patch('package-lookup', 'mmevt.patches.config_resolution',
          ('mmengine.utils.package_utils.is_installed',
           'mmengine.utils.package_utils.get_installed_path',
           'mmengine.utils.package_utils.package2module',
           '(and their imports in mmengine.utils, mmengine.config.config, '
           'mmengine.hub.hub)'),
          'pkg:: configs (mmdet::, mmseg::, mmpretrain::, mmevt::) resolve without '
          'pkg_resources and for any distribution name of a toolkit module',
          'needed: mmengine 0.10.7 imports pkg_resources, gone since setuptools 82',
          'needed: its importlib versions look up MODULE2PACKAGE names, and '
          "'mmsegmentation' is not the fork's distribution (onedl-mmsegmentation)",
          'open-mmlab/mmengine#1676 (merged after 0.10.7, never released)', 'import',
          config_resolution.enable_package_lookup,
          "mmengine's is_installed / get_installed_path answer from the module Python "
          'would import (a package earlier on sys.path wins, as at import) instead of '
          "pkg_resources' records; where pkg_resources is missing they work instead of "
          'raising'),
    Patch('config-prefix', 'mmevt.patches.config_resolution',
          ('mmengine.config.utils.MODULE2PACKAGE', ),
          "adds 'mmevt' so mmevt:: paths resolve", 'needed', 'needed',
          'mmengine knows a fixed list of OpenMMLab packages', 'import',
          config_resolution.enable_config_prefix,
          "one more key in MODULE2PACKAGE ('mmevt'); nothing else"),
    Patch('config-index-cache', 'mmevt.patches.config_resolution',
          ('mmengine.config.utils._get_cfg_metainfo', ),
          "reads a toolkit's metafiles once per process, not for every pkg:: base "
          '(same answers, same ValueError fallback)', 'speed-up', 'speed-up (same code)',
          'none filed (measured here: an UperNet config parses in a tenth of the time)',
          'import', config_resolution.enable_config_index_cache,
          "every config's pkg:: bases parse faster; a metafile edited while the process "
          'runs is not re-read'),
    Patch('checkpoint-allow-list', 'mmevt.patches.checkpoint_loading',
          ('torch.serialization safe globals', ),
          'OpenMMLab runner checkpoints load under weights_only=True (HistoryBuffer, '
          'numpy arrays / scalars / dtypes under their numpy 1 and numpy 2 names, a '
          "restricted getattr for HistoryBuffer's statistics and OneCycle's anneal "
          'functions)',
          'needed: mmengine 0.10.7 loads with torch\'s default weights_only=True '
          'without an allow-list', 'needed: the fork allow-lists only inside its loader, '
          'with the real getattr', 'open-mmlab/mmengine#1655', 'import',
          checkpoint_loading.enable_safe_checkpoint_loading,
          'every torch.load(weights_only=True) in the process also accepts numpy arrays, '
          "scalars and dtypes, mmengine's HistoryBuffer and the restricted getattr; the "
          'real getattr and every other global stay refused'),
    Patch('strict-checkpoint-loader', 'mmevt.patches.checkpoint_loading',
          ("mmengine.runner.checkpoint.CheckpointLoader scheme ''",
           'mmengine.runner.checkpoint.load_url',
           "mmengine.runner.checkpoint's name torch (its load only)",
           'mmengine.runner.checkpoint._safe_torch_load (fork)'),
          "every CheckpointLoader scheme (local, http(s), torchvision / modelzoo, "
          'open-mmlab, mmcls, pavi, s3 / petrel) loads with weights_only=True and the '
          'allow-list in force; a refused file raises in mmevt\'s words (opt-out: '
          'MMEVT_ALLOW_UNSAFE_CHECKPOINTS=1 or TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, logged '
          'at each use)',
          "needed: load_from_http's load_url is torch.hub.load_state_dict_from_url, "
          'whose weights_only defaults to False (a pickle from a URL runs)',
          'needed: the same load_url, and _safe_torch_load retries refused files with '
          "weights_only=False and its safe_globals context removes mmevt's entries on exit",
          'found here (mmengine 0.10.7 / fork 0.10.12 mmengine/runner/checkpoint.py)',
          'import', checkpoint_loading.enable_strict_checkpoint_loader,
          "checkpoints of any model loaded through mmengine (load_checkpoint, "
          "CheckpointLoader, the runner's load_from / resume, init_cfg Pretrained) refuse "
          'what weights_only refuses, from URLs too; torch.load / torch.hub called '
          'directly by other code are untouched'),
    Patch('atomic-local-writes', 'mmevt.patches.atomic_writes',
          ('mmengine.fileio.backends.local_backend.LocalBackend.put',
           'mmengine.fileio.backends.local_backend.LocalBackend.put_text',
           "mmengine.hooks.checkpoint_hook's name open (last_checkpoint only)"),
          'a killed job never leaves a truncated checkpoint or last_checkpoint (temporary '
          'file + os.replace, only where that keeps the write\'s meaning)',
          'needed', 'needed (same code)', 'none filed', 'import',
          atomic_writes.enable_atomic_local_writes,
          "mmengine's local writes (checkpoints, dump(), put / put_text, log uploads) of "
          'a new or a regular single-link file replace it whole (mode and owner kept); '
          'symlinks are written through, hard-linked files, FIFOs and devices in place, '
          'as before; writes from a size threshold up (checkpoints; '
          '`mmevt.patches.atomic_writes.FSYNC_BYTES`) are fsynced'),
    Patch('cpu-distributed', 'mmevt.patches.cpu_distributed',
          ('mmengine.dist.utils._init_dist_pytorch', 'mmengine.dist.utils._init_dist_slurm'),
          'tools/dist_train.sh (--launcher pytorch) and tools/slurm_train.sh (--launcher '
          'slurm) with gloo on machines without GPUs; the gloo group is destroyed at '
          'interpreter exit, where a rank left to finalization can abort after its work',
          'needed: both always call torch.cuda.set_device', 'needed (same code)',
          'none filed (the exit: pytorch/pytorch#190489)', 'import',
          cpu_distributed.enable_cpu_distributed,
          'a gloo run of the pytorch or slurm launcher on a machine without CUDA (nor MLU, '
          'NPU, MUSA) starts instead of failing in torch.cuda.set_device, and its group is '
          'destroyed at exit (atexit, after a garbage-collection pass with SIGCHLD at its '
          'default) unless the program destroyed it; every other launch is unchanged'),
    Patch('plain-param-groups', 'mmevt.patches.param_groups',
          ('mmengine.optim.DefaultOptimWrapperConstructor.__call__', ),
          "compile=True trains configs with a paramwise_cfg or a layer-decay constructor: "
          "the optimizer's parameter groups are plain dicts, not the ConfigDicts Dynamo "
          "fails on in the optimizer step",
          "needed: the registry build turns the constructor's groups into ConfigDicts, "
          "and torch 2.14's Dynamo fails in AdamW's step over them",
          'needed (same code)', 'found here (docs/benchmark.md)', 'import',
          param_groups.enable_plain_param_groups,
          "every optimizer an mmengine constructor builds holds plain dict copies of its "
          'parameter groups (same keys, values and parameter lists): a ConfigDict\'s '
          'attribute access (group.lr) on a group no longer works; the optimizer, its '
          'state_dict and the schedulers are unchanged'),
    Patch('flop-handles', 'mmevt.patches.flop_handles',
          ('mmengine.analysis.complexity_analysis._DEFAULT_SUPPORTED_FLOP_OPS',
           'fvcore.nn.flop_count._DEFAULT_SUPPORTED_OPS'),
          'the FLOP counters count fused attention (aten::scaled_dot_product_attention)',
          'needed', 'needed (same code)', 'none filed', 'import',
          flop_handles.register_flop_handles,
          "FLOP counts of every model that calls F.scaled_dot_product_attention grow "
          "by its q k^T and A v multiply-adds (uncounted without mmevt); other models' "
          'counts are unchanged'),
    Patch('vis-cam-pkg-resources', 'mmevt.patches.legacy_imports',
          ('pkg_resources, while tools/visualization/vis_cam.py loads mmpretrain\'s', ),
          "mmpretrain's vis_cam.py imports pkg_resources (grad-cam's version): a stand-in "
          'with get_distribution for that load only, where none is installed',
          'needed (mmpretrain 1.2.0, setuptools >= 82)',
          "not needed: onedl-mmpretrain's vis_cam.py does not import it (left alone)",
          'found here', 'vis_cam.py'),
    Patch('mmaction2-drn-stub', 'tools/patches/mmaction2-1.2.0 (tools/build_mmaction2_wheel.py)',
          ('mmaction.models.localizers.drn (absent from mmaction2 1.2.0)',
           "mmaction2 1.2.0's Requires-Dist (from its sdist's egg-info)"),
          'import mmaction.models works: mmaction2 1.2.0 imports a drn package that its '
          'wheel and sdist lack; a stand-in registers DRN, which raises when built, citing '
          "the issue; the wheel built from the sdist declares PyPI's wheel's dependencies",
          'needed (mmaction2 1.2.0, its last release; requirements/action-upstream.txt)',
          'not installed: mmaction2 1.2.0 asserts mmcv < 2.2.0, and it has no fork',
          'open-mmlab/mmaction2#2714', 'mmaction2 1.2.0+mmevt1',
          others="mmaction2 is installed as 1.2.0+mmevt1 (pip list says so): PyPI's 1.2.0 "
                 'files plus mmaction/models/localizers/drn/, all in its RECORD; building '
                 'DRN raises instead of every mmaction2 model failing at import'),
    Patch('mmdeploy-exporter', 'mmevt.deploy.rewriters.torch_onnx', ('torch.onnx.export', ),
          'dynamo=False by default: mmdeploy 1.3.1 rewriters need the TorchScript exporter',
          'needed (torch >= 2.9)', 'needed: mmdeploy 1.3.1 on both stacks '
          '(onedl-mmdeploy does not install here)', 'found here', 'mmevt-deploy'),
    Patch('mmdeploy-cast-long', 'mmevt.deploy.rewriters.torch_onnx',
          ('torch.onnx.symbolic_opset9._cast_Long', ),
          "provides the helper torch removed, which mmdeploy's RoIAlign symbolic imports",
          'needed', 'needed', 'found here', 'mmevt-deploy'),
    # the rewriters: registered with mmdeploy's FUNCTION_REWRITER for onnxruntime, named
    # <target>__onnxruntime, one module each
    Patch('mmdeploy-sdpa-rewriter', 'mmevt.deploy.rewriters.scaled_dot_product_attention',
          ('FUNCTION_REWRITER: F.scaled_dot_product_attention (onnxruntime)', ),
          "mmdeploy's rewriter divides the logits by scale where torch multiplies",
          'needed', 'needed', 'found here (docs/deployment.md)', 'mmevt-deploy'),
    Patch('mmdeploy-adaptive-pool-rewriter', 'mmevt.deploy.rewriters.adaptive_pool',
          ('FUNCTION_REWRITER: F.adaptive_avg_pool2d (onnxruntime)', ),
          "mmdeploy's rewriter pools wrong windows when the output size does not divide "
          'the input size (UperNet)', 'needed', 'needed', 'found here (docs/deployment.md)',
          'mmevt-deploy'),
    Patch('mmdeploy-cascade-rewriter', 'mmevt.deploy.rewriters.cascade_roi_head',
          ('FUNCTION_REWRITER: CascadeRoIHead.predict_bbox (onnxruntime)', ),
          "mmdeploy's rewriter asserts class-agnostic regression in the first stages; ours "
          'also serves heads that regress per class', 'needed', 'needed',
          'found here (docs/deployment.md)', 'mmevt-deploy'),
)
# What a user sees with an import-time patch switched off (docs/patches.md's table says it too)
SWITCHED_OFF: Dict[str, str] = {
    'package-lookup': "upstream mmengine 0.10.7 without `pkg_resources` (setuptools >= 82): every "
                      "`pkg::` config fails with `No module named 'pkg_resources'`; the fork: "
                      '`mmseg::` fails (`mmsegmentation is not installed`)',
    'config-prefix': '`mmevt::` config paths do not resolve',
    'config-index-cache': 'configs with `pkg::` bases parse as slowly as without mmevt (an '
                          'UperNet config ~10x)',
    'checkpoint-allow-list': 'runner checkpoints (resume, `tools/test.py`) are refused under '
                             '`weights_only=True`; the refusal names the patch',
    'strict-checkpoint-loader': "mmengine's own loaders: URLs with `weights_only=False` (a "
                                "pickle served from a URL runs), local files as torch's "
                                "default, the fork's retry with `weights_only=False`; "
                                '`import mmevt` warns',
    'atomic-local-writes': 'a job killed while writing can leave a truncated checkpoint, json '
                           'or `last_checkpoint`',
    'cpu-distributed': '`tools/dist_train.sh` / `tools/slurm_train.sh` with gloo on a machine '
                       'without GPUs fails in `torch.cuda.set_device`',
    'plain-param-groups': '`compile=True` with a `paramwise_cfg` or a layer-decay constructor '
                          "fails in the optimizer step: `'UserDefinedDictVariable' object has "
                          "no attribute 'items'`",
    'flop-handles': 'the counters log `Unsupported operator aten::scaled_dot_product_attention` '
                    "and count it as zero (EVT's attention uncounted)",
}
SWITCH_ENV = 'MMEVT_PATCHES'
IMPORT_PATCHES = tuple(p.name for p in PATCHES if p.when == 'import')
APPLIED: Dict[str, str] = {}  # name -> 'applied' or 'switched off (MMEVT_PATCHES=...)'


def switched_off(value: Optional[str] = None) -> Tuple[str, ...]:
    """The import-time patches ``MMEVT_PATCHES`` switches off.

    The value is a comma-separated list of ``-NAME`` (switch off) and ``NAME`` / ``+NAME``
    (keep on, the default), e.g. ``-atomic-local-writes,-flop-handles``.

    Args:
        value (str, optional): the list. Defaults to the environment variable.

    Raises:
        ValueError: an entry names no import-time patch.
    """
    value = os.environ.get(SWITCH_ENV, '') if value is None else value
    off = []
    for entry in filter(None, (e.strip() for e in value.split(','))):
        name = entry.lstrip('+-')
        if name not in IMPORT_PATCHES:
            other = next((p for p in PATCHES if p.name == name), None)
            why = (f'it applies only inside {other.when}, not at import' if other else
                   'no patch has that name')
            raise ValueError(f'{SWITCH_ENV}={value!r}: {entry!r} cannot be switched ({why}); '
                             f'the import-time patches are {", ".join(IMPORT_PATCHES)}, '
                             'each written -NAME to switch it off')
        if entry.startswith('-'):
            off.append(name)
        elif name in off:
            off.remove(name)
    return tuple(off)


def is_applied(name: str) -> bool:
    """Whether the import-time patch ``name`` is in force in this process."""
    return APPLIED.get(name) == 'applied'


def switched_off_note(name: str) -> str:
    """A sentence for errors on paths that need patch ``name`` ('' when it is applied)."""
    if is_applied(name):
        return ''
    return (f" mmevt's patch {name!r} is switched off ({SWITCH_ENV}="
            f"{os.environ.get(SWITCH_ENV, '')!r}); remove -{name} from {SWITCH_ENV} to switch "
            'it back on.')


@contextlib.contextmanager
def patches_needed(*names: str) -> Iterator[None]:
    """For a path of mmevt's own code that needs patches ``names``: an error raised inside the
    block gets a note naming each of them that ``MMEVT_PATCHES`` switched off."""
    try:
        yield
    except Exception as err:
        notes = ''.join(switched_off_note(name) for name in names)
        if notes and hasattr(err, 'add_note'):  # Python >= 3.11
            err.add_note(notes.strip())
        raise


def apply_import_patches() -> Dict[str, str]:
    """Apply every ``when='import'`` patch of :data:`PATCHES` that ``MMEVT_PATCHES`` does not
    switch off (idempotent).

    Returns:
        dict: patch name -> ``'applied'`` or ``'switched off (MMEVT_PATCHES=...)'`` (a patch
        of a library that is not installed, e.g. fvcore's counter, skips that library itself).

    Raises:
        ValueError: ``MMEVT_PATCHES`` names a patch that does not exist or is not applied at
        import.
    """
    off = switched_off()
    for patch in PATCHES:
        if patch.when != 'import' or patch.apply is None:
            continue
        if patch.name in off:
            if patch.name not in APPLIED and patch.name == 'strict-checkpoint-loader':
                warnings.warn(f'mmevt: {SWITCH_ENV} switches off {patch.name!r}: '
                              f'{SWITCHED_OFF[patch.name]}')
            APPLIED.setdefault(patch.name, f'switched off ({SWITCH_ENV}='
                                           f'{os.environ.get(SWITCH_ENV, "")})')
            continue
        patch.apply()
        APPLIED[patch.name] = 'applied'
    return dict(APPLIED)


def describe() -> List[str]:
    """The table as text lines (``python -m mmevt.info``)."""
    lines = []
    for p in PATCHES:
        state = APPLIED.get(p.name, 'not applied' if p.when == 'import'
                            else f'inside {p.when} only')
        lines += [f'{p.name} [{state}] ({p.home})', f'  replaces: {"; ".join(p.replaces)}',
                  f'  fixes:    {p.fixes}', f'  others:   {p.others}',
                  f'  upstream: {p.upstream}', f'  fork:     {p.fork}',
                  f'  see:      {p.reference}']
    return lines
