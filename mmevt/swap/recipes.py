"""``--recipe evt``: the optimizer, schedule and backbone settings of our own configs.

The recipe (AdamW, lr, weight decay, no-decay rules; the backbone's drop path and norm) is
taken from our config of the same family and arch (:data:`FAMILY_CONFIGS`), loaded with
mmengine; query-based models (DETR family, Sparse R-CNN, MaskFormer / Mask2Former, KNet)
keep their own AdamW recipe, since none of our families matches them
(:func:`recipe_family`); so do mmpose's bottom-up models (our pose family is top-down).
What differs by toolkit (its families, its schedule) its module says
(:class:`mmevt.toolkits.base.Toolkit`).
"""
import glob
import os.path as osp
from typing import TYPE_CHECKING, Any, Optional, Tuple

from ..models.backbones.archs import ARCH_NAMES, canonical_name, resolve_arch
from ..toolkits import get_toolkit, load_config
from ..toolkits.config_values import to_plain
from ..utils.lists import as_list
from .consumers import HEAD_KEYS

if TYPE_CHECKING:  # the plan imports this module to fill its recipe in
    from .plan import SwapPlan

# Our config holding each family's recipe; ``{arch}`` is the EVT arch (configs/ layout).
FAMILY_CONFIGS = {
    'mask_rcnn': 'det/mask_rcnn/mask-rcnn_{arch}_fpn_1x_coco.py',
    'cascade': 'det/cascade_rcnn/cascade-mask-rcnn_{arch}_fpn_ms-3x_coco.py',
    'retinanet': 'det/retinanet/retinanet_{arch}_fpn_1x_coco.py',
    'sem_fpn': 'seg/sem_fpn/fpn_{arch}_8xb2-80k_ade20k-512x512.py',
    'upernet': 'seg/upernet/upernet_{arch}_8xb2-160k_ade20k-512x512.py',
    'cls': 'cls/*/{arch}_*xb*_in1k.py',
    'pose': 'pose/topdown_heatmap/td-hm_{arch}_8xb32-210e_coco-256x192.py',
    'action': 'action/tsn/tsn_{arch}_8xb32-1x1x3-100e_kinetics400-rgb.py',
    'rotated': 'rotated/oriented_rcnn/oriented-rcnn-le90_{arch}_fpn_1x_dota.py',
}
# Where a family's optimizer comes from when it is not our AdamW (named in DST's comment).
FOREIGN_OPTIMIZERS = {'pose': "mmpose's Swin-T recipe",
                      'action': "mmaction2's TSN recipe for a transformer backbone",
                      'rotated': "mmrotate's Swin-T DOTA recipe"}
# The arch whose config holds a family's shared recipe (the other sizes inherit it).
SHARED_RECIPE_ARCH = 'evt-t'
# Query-based models: set-prediction decoders whose AdamW recipes (backbone lr x0.1,
# gradient clipping) none of our families matches; --recipe evt keeps their optimizer.
QUERY_BASED_MODELS = ('DETR', 'ConditionalDETR', 'DABDETR', 'DeformableDETR', 'DINO',
                      'DDQDETR', 'SparseRCNN', 'QueryInst', 'MaskFormer', 'Mask2Former')
QUERY_BASED_HEADS = ('MaskFormerHead', 'Mask2FormerHead', 'IterativeDecodeHead')


def canonical_arch(arch: str) -> str:
    """The canonical name of ``arch`` (an arch name or alias, any case): our configs'.

    Raises:
        ValueError: not an arch of ours (the message names ``--arch``).
    """
    try:
        return canonical_name(arch)
    except ValueError as err:  # its text offers an arch dict, which --arch cannot take
        raise ValueError(f'--arch must be one of {list(ARCH_NAMES)}, got {arch!r}') from err


def query_based(model_cfg: dict) -> bool:
    """Whether ``model_cfg`` is a query-based model (:data:`QUERY_BASED_MODELS`, or a head
    of :data:`QUERY_BASED_HEADS`)."""
    heads = [h for k in HEAD_KEYS for h in as_list(model_cfg.get(k)) if isinstance(h, dict)]
    return (model_cfg.get('type') in QUERY_BASED_MODELS
            or any(h.get('type') in QUERY_BASED_HEADS for h in heads))


def recipe_family(model_cfg: dict, toolkit: str) -> Optional[str]:
    """Which of our families' recipes fits ``model_cfg``: None for query-based models where
    the toolkit keeps their recipe (:attr:`~mmevt.toolkits.base.Toolkit.keeps_query_recipe`),
    else the toolkit's :meth:`~mmevt.toolkits.base.Toolkit.recipe_family` (e.g. mmdet: a
    cascade RoI head -> ``cascade``; mmpose: None for bottom-up models).
    """
    kit = get_toolkit(toolkit)
    if kit.keeps_query_recipe and query_based(model_cfg):
        return None
    return kit.recipe_family(model_cfg)


def family_config(family: str, arch: str) -> Tuple[str, bool]:
    """Path of our config of ``family`` for ``arch``, and whether it is that arch's (else
    the family's shared recipe, the ``evt-t`` config).

    Raises:
        FileNotFoundError: our configs are not installed, or the family has none.
    """
    from ..hub import mim_root
    root = mim_root()
    if root is None:
        raise FileNotFoundError('mmevt configs not found (neither a wheel with .mim/configs '
                                'nor a source checkout); --recipe evt needs them')
    for name, own in ((canonical_arch(arch), True), (SHARED_RECIPE_ARCH, False)):
        hits = sorted(glob.glob(osp.join(root, 'configs',
                                         FAMILY_CONFIGS[family].format(arch=name))))
        hits = [h for h in hits if '384px' not in h and '_test-' not in h]
        if hits:
            return hits[0], own
    raise FileNotFoundError(f'no config of family {family!r} under {root}/configs')


def _with_scope(cfg: Any, toolkit: str) -> Any:
    """Pin the toolkit's scope on each dict with a ``type`` at the top of ``cfg``."""
    if isinstance(cfg, dict):
        cfg = dict(cfg)
        cfg.pop('_scope_', None)
        return dict(_scope_=toolkit, **cfg) if 'type' in cfg else cfg
    if isinstance(cfg, list):
        return [_with_scope(c, toolkit) for c in cfg]
    return cfg


def apply_recipe(plan: 'SwapPlan', src_cfg, recipe: str) -> None:
    """Fill the backbone's drop path / norm and the optimizer overrides into ``plan``.

    Args:
        plan (SwapPlan): the plan, changed in place.
        src_cfg (mmengine.Config): SRC's config.
        recipe (str): ``'evt'`` (our family's) or ``'keep'`` (SRC's).
    """
    arch_drop = resolve_arch(plan.arch)['drop_path_rate']
    if recipe == 'keep':
        plan.recipe_note = 'the optimizer and schedule of SRC (--recipe keep)'
        return
    kit = get_toolkit(plan.toolkit)
    family = recipe_family(src_cfg.model, plan.toolkit)
    if family is None:
        plan.recipe_note = kit.kept_recipe_note(src_cfg.model.get('type'))
        path, _ = family_config(kit.backbone_family, plan.arch)
        ours = load_config(path)
        norm = ours.model.backbone.get('norm_cfg')
        if norm:
            plan.backbone['norm_cfg'] = (to_plain(norm), f'as our {osp.basename(path)}')
        plan.backbone['drop_path_rate'] = (arch_drop, f"{plan.arch}'s ImageNet value")
        return
    path, own = family_config(family, plan.arch)
    ours = load_config(path)
    src_name = osp.basename(path)
    if not own:
        plan.notes.append(f'no {family} config of ours for {plan.arch}: the recipe is the '
                          f"family's shared one ({src_name})")
    ob = ours.model.backbone
    drop = ob.get('drop_path_rate') if own and ob.get('drop_path_rate') is not None \
        else arch_drop
    plan.backbone['drop_path_rate'] = (drop, f'{plan.arch}: as our {src_name}' if own
                                       else f"{plan.arch}'s ImageNet value")
    if ob.get('norm_cfg'):
        plan.backbone['norm_cfg'] = (to_plain(ob.norm_cfg), f'as our {src_name}')
    plan.recipe_note = f'the {family} family of ours ({src_name})'
    optimizer = ours.optim_wrapper.optimizer
    plan.top_level.append(('optim_wrapper',
                           dict(_delete_=True, **_with_scope(to_plain(ours.optim_wrapper),
                                                             plan.toolkit)),
                           f'AdamW, lr, weight decay and no-decay rules of our {src_name}'
                           if optimizer.type == 'AdamW' else
                           f'{optimizer.type} and lr of our {src_name} '
                           f"({FOREIGN_OPTIMIZERS.get(family, 'its recipe')}); SRC's schedule "
                           'is kept'))
    if kit.schedule_why:
        sched = _with_scope(to_plain(ours.param_scheduler), plan.toolkit)
        why = f'the schedule of our {src_name}'
        max_iters = src_cfg.get('train_cfg', {}).get('max_iters')
        if kit.schedule_ends_at_max_iters and max_iters \
                and not sched[-1].get('by_epoch', True):
            sched[-1]['end'] = max_iters
            why += f", ending at SRC's max_iters ({max_iters})"
        why += kit.schedule_why
        plan.top_level.append(('param_scheduler', sched, why))
    if ours.get('auto_scale_lr'):
        plan.top_level.append(('auto_scale_lr', to_plain(ours.auto_scale_lr),
                               f'the batch our lr is for ({src_name}); --auto-scale-lr '
                               'scales it'))
    if ours.get('sync_bn'):
        plan.top_level.append(('sync_bn', ours.sync_bn, f'as our {src_name}'))
