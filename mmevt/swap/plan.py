"""The swap's plan: what DST overrides in SRC and why, and writing DST.

:func:`plan_swap` measures SRC's backbone (:mod:`~mmevt.swap.probe`), remaps the modules
that read it (:mod:`~mmevt.swap.consumers`), sets EVT's input normalisation and fills in the
recipe (:mod:`~mmevt.swap.recipes`); :func:`swap_config` writes the plan as DST
(:mod:`~mmevt.swap.render`).
"""
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..analysis import count_params
from ..models.backbones.archs import resolve_arch
from ..toolkits import TOOLKITS, config_toolkit, get_toolkit, load_config
from .consumers import CHANNEL_KEYS, ModelPath, concatenated_outputs, dotted_path, \
    find_consumers, remap_channels, remap_featuremap_size
from .probe import EVT_STRIDES, BackboneOutputs, build_source_model, map_outputs, \
    measure_backbone
from .recipes import apply_recipe, canonical_arch
from .render import render
from .smoke import quiet_logger, runner_model_cfg

# ImageNet normalisation of EVT's classification configs (mmpretrain's; RGB).
IMAGENET_MEAN = [123.675, 116.28, 103.53]
IMAGENET_STD = [58.395, 57.12, 57.375]


@dataclass
class Override:
    """One override of ``model`` in the written config: ``path`` (keys from ``model``;
    an int indexes a list of heads), the new values, and why."""
    path: ModelPath
    values: Dict[str, Any]
    why: str


@dataclass
class SwapPlan:
    """Everything the written config says, and the notes printed to the user.

    ``source_params`` is the parameter count of SRC's whole model where :func:`plan_swap`
    built it (``count_source``), else None.
    """
    src: str
    arch: str
    toolkit: str
    outputs: BackboneOutputs
    stages: List[int]
    backbone: Dict[str, Any]
    overrides: List[Override] = field(default_factory=list)
    top_level: List[Tuple[str, Any, str]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    recipe_note: str = ''
    source_params: Optional[int] = None


def load_src(src: str):
    """SRC's config (after ``import mmevt``), with an error naming a missing SRC.

    Args:
        src (str): a config file or a toolkit path (``mmdet::...``).

    Returns:
        mmengine.Config: the loaded config.

    Raises:
        ValueError: a toolkit path that does not resolve.
        FileNotFoundError: SRC does not exist.
    """
    import mmevt  # noqa: F401  (mmevt:: paths, the pkg:: resolution without pkg_resources)
    from mmengine.config import Config
    path = src
    if '::' in src:
        try:  # the toolkit's own .mim/configs, as a `_base_ = 'pkg::path'` resolves it
            path, _ = Config._get_cfg_path(src, os.getcwd())
        except Exception as err:
            raise ValueError(f'SRC {src!r}: {err}') from err
    if not osp.isfile(path):
        prefixes = ' / '.join(f"'{name}::'" for name in TOOLKITS)
        raise FileNotFoundError(f'SRC config {src!r} does not exist (give a file or a '
                                f'{prefixes} path)')
    return load_config(path)


def plan_swap(src: str, arch: str, pretrained: Optional[str] = None, recipe: str = 'evt',
              count_source: bool = False) -> Tuple[SwapPlan, Any, Any]:
    """Measure SRC's backbone, map it onto ``arch`` and find what to override.

    Args:
        src (str): SRC, a config file or a toolkit path.
        arch (str): the EVT arch (a name or alias, any case).
        pretrained (str, optional): a backbone checkpoint for ``init_cfg``. Defaults to
            None.
        recipe (str): ``'evt'`` or ``'keep'`` (:func:`apply_recipe`). Defaults to
            ``'evt'``.
        count_source (bool): build SRC's whole model (as the runner does) rather than its
            backbone alone and keep its parameter count in ``plan.source_params``; the
            backbone probed is the model's. Defaults to False.

    Returns:
        tuple: the :class:`SwapPlan`, SRC's config and its built original backbone.

    Raises:
        ValueError: SRC cannot be swapped (the message says why: e.g. a model reading no
            stride-32 map, a consumer whose channels do not match the backbone's outputs,
            mmaction2's TSM or 3D recognizers: the toolkit's
            :meth:`~mmevt.toolkits.base.Toolkit.refuse_unswappable`).
    """
    if recipe not in ('evt', 'keep'):
        raise ValueError(f"--recipe must be 'evt' or 'keep', got {recipe!r}")
    arch = canonical_arch(arch)
    cfg = load_src(src)
    toolkit = config_toolkit(cfg, src)
    kit = get_toolkit(toolkit)
    model = cfg.get('model')
    if not isinstance(model, dict) or not isinstance(model.get('backbone'), dict):
        raise ValueError(f'{src}: model.backbone is missing; nothing to swap')
    kit.refuse_unswappable(model, src)  # before building (TSM's backbone fails on a frame)
    source = None
    if count_source:
        with quiet_logger():  # SRC's INFO notices; the smoke test's build of DST logs them
            source = build_source_model(runner_model_cfg(cfg, toolkit), toolkit)
    outputs, original = measure_backbone(model.backbone, toolkit,
                                         backbone=None if source is None else source.backbone)
    stages, notes = map_outputs(outputs)
    dims = resolve_arch(arch)['embed_dims']
    backbone: Dict[str, Any] = dict(
        _delete_=(True, None), **kit.swap_backbone_type(), arch=(arch, None),
        out_indices=(tuple(stages), f'the stages of strides '
                     f'{[EVT_STRIDES[s] for s in stages]}, for {outputs.type}\'s outputs '
                     f'{outputs.describe()}'))
    plan = SwapPlan(src, arch, toolkit, outputs, stages, backbone, notes=notes,
                    source_params=None if source is None else count_params(source))
    consumers, cnotes = find_consumers(model)
    # after the consumers: a C4 detector's shared_head is the reason that names the fix
    if stages[-1] != len(EVT_STRIDES) - 1:
        raise ValueError(f'{src}: the model reads {outputs.type} outputs {outputs.describe()}, '
                         f'EVT stages {stages} only: EVT\'s later stages would run for nothing '
                         '(no gradient reaches them, which distributed training refuses), and '
                         'EVT has no counterpart of a map fusing all scales (e.g. HRNet\'s '
                         'stride-4 output); swap a config whose model reads a stride-32 map')
    plan.notes.extend(cnotes)
    concat = concatenated_outputs(model.get('neck'), len(outputs.channels))
    for path, ccfg in consumers:
        where = dotted_path(path)
        new = remap_channels(ccfg, where, outputs, stages, dims,
                             concat=None if path == ('neck', ) else concat)
        new.update(remap_featuremap_size(ccfg, where, outputs, stages))
        olds = {k: ccfg[k] for k in new}
        plan.overrides.append(Override(path, new, f'{ccfg.get("type")} reads the backbone: '
                                       f'{olds} -> {arch}\'s channels'))
    if None in outputs.strides:
        neck = model.get('neck')
        if not neck:
            # a `neck=None` of the base cannot be merged into: replace it
            gap = dict(_delete_=True) if 'neck' in model else {}
            plan.overrides.append(Override(('neck', ), dict(gap, type='GlobalAveragePooling'),
                                           f'the head takes pooled features ({outputs.type} '
                                           'pools them itself); EVT returns maps'))
        elif any(k in neck for k in CHANNEL_KEYS):
            raise ValueError(f'model.neck ({neck.get("type")}) takes pooled features of '
                             f'{outputs.type}; EVT returns maps: not supported')
    if model.get('pretrained'):
        plan.overrides.append(Override((), dict(pretrained=None),
                                       f"SRC's model.pretrained ({model.pretrained}) is its "
                                       'original backbone\'s weights'))
    if pretrained:
        backbone['init_cfg'] = (dict(type='Pretrained', checkpoint=pretrained,
                                     prefix='backbone.'),
                                'an mmevt classifier checkpoint (keys under backbone.)')
    uses = kit.gpu_only_reason(model)
    if uses:
        plan.notes.append(f'this model needs a GPU to train: {uses} (mmcv has CUDA kernels of '
                          'these only; --check, which runs on the CPU, is refused)')
    _normalisation(plan, cfg)
    apply_recipe(plan, cfg, recipe)
    return plan, cfg, original


def _normalisation(plan: SwapPlan, cfg) -> None:
    """Use ImageNet RGB normalisation (EVT's classification configs') where SRC differs."""
    top = not cfg.model.get('data_preprocessor')  # mmpretrain keeps it at the top level
    dp = cfg.get('data_preprocessor') if top else cfg.model.data_preprocessor
    if not isinstance(dp, dict) or 'mean' not in dp:
        return
    # the toolkit's key and value (mmaction2's pipelines decode frames as RGB already)
    rgb_key, rgb = get_toolkit(plan.toolkit).rgb_setting
    same = ([float(v) for v in dp['mean']] == IMAGENET_MEAN
            and [float(v) for v in dp.get('std', [])] == IMAGENET_STD
            and bool(dp.get(rgb_key, False)) == rgb)
    if same:
        return
    values = {'mean': IMAGENET_MEAN, 'std': IMAGENET_STD, rgb_key: rgb}
    why = (f"EVT's ImageNet weights expect RGB with ImageNet mean / std; SRC normalises "
           f"with mean {list(dp['mean'])}, std {list(dp.get('std', []))}")
    if top:
        plan.top_level.append(('data_preprocessor', values, why))
    else:
        plan.overrides.append(Override(('data_preprocessor', ), values, why))


def swap_config(src: str, arch: str, out: str, pretrained: Optional[str] = None,
                recipe: str = 'evt', overwrite: bool = False,
                command: Optional[str] = None,
                log: Callable[[str], None] = print,
                count_source: bool = False) -> Tuple[SwapPlan, Any, Any]:
    """Write DST (``out``) for ``src`` with ``arch``.

    Args:
        src, arch, pretrained, recipe, count_source: as :func:`plan_swap` takes them.
        out (str): DST, a ``.py`` file (its folder is made).
        overwrite (bool): replace an existing DST. Defaults to False.
        command (str, optional): the command named in DST's header. Defaults to the
            ``mmevt-swap`` command of these arguments.
        log (callable): where the notes and the summary line go. Defaults to ``print``.

    Returns:
        tuple: what :func:`plan_swap` returns.

    Raises:
        FileExistsError: DST exists and ``overwrite`` is False.
        ValueError: DST is not a ``.py`` file, or what :func:`plan_swap` raises.
    """
    if osp.exists(out) and not overwrite:
        raise FileExistsError(f'{out} exists; pass --overwrite to replace it')
    if not out.endswith('.py'):
        raise ValueError(f'--out must be a .py config file, got {out!r}')
    plan, cfg, original = plan_swap(src, arch, pretrained, recipe, count_source)
    command = command or (f'mmevt-swap {src} --arch {plan.arch} --out {out} --recipe {recipe}'
                          + (f' --pretrained {pretrained}' if pretrained else ''))
    # mmengine resolves a relative `_base_` from DST's folder
    base = src if '::' in src else osp.relpath(osp.abspath(src), osp.dirname(osp.abspath(out)))
    text = render(plan, cfg, command, base)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        f.write(text)
    for n in plan.notes:
        log(f'note: {n}')
    log(f'wrote {out}: {plan.outputs.type} {plan.outputs.describe()} -> {plan.arch} '
        f'stages {list(plan.stages)}; remapped '
        + (', '.join(dotted_path(o.path) for o in plan.overrides if o.path) or 'nothing'))
    return plan, cfg, original
