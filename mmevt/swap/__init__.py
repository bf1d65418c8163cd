"""Swap EVT into any OpenMMLab config: write a short config inheriting it.

    python tools/misc/swap_backbone.py SRC --arch ARCH --out DST [--pretrained PATH]
        [--recipe evt|keep] [--check] [--overwrite]

``SRC`` is a config file or a toolkit path (``mmdet::``, ``mmseg::``, ``mmpretrain::``,
``mmpose::``, ``mmaction::``, any toolkit of :data:`mmevt.toolkits.TOOLKITS`).
``DST`` inherits it (``_base_``) and overrides only what changes, with a comment per
override: ``custom_imports``, the backbone (``_delete_=True``), the input channels of the
modules that read the backbone, and with ``--recipe evt`` the optimizer.

Nothing is guessed from channel values alone: the original backbone is built on the CPU and
run once at :data:`PROBE_SIZE`, which gives the channels and strides of its outputs. Each
output goes to the EVT stage of the same stride (:data:`EVT_STRIDES`); an output whose stride
does not grow over the previous output's (a dilated backbone: mmseg's ``*-d8`` ResNets keep
stride 8 in their last stages) goes to the next EVT stage, since EVT has no dilation (the
decode heads resize their inputs, so they accept the coarser maps). The consumers are the
neck (the modules the toolkit feeds the backbone's outputs to), else the heads, including
nested ones (KNet's ``kernel_generate_head``), and a neck that only pools (mmpretrain's
``GlobalAveragePooling``) passes its input on to the head, one that concatenates the maps
(mmpose's ``FeatureMapProcessor(concat=True)``) the sum of their channels. Only their
input-channel keys change (``in_channels``, read through ``in_index`` where the head has one,
and ``c1_in_channels``; and mmpose's ``in_featuremap_size`` where EVT's map size differs),
and each old value must equal what the built backbone measured, else the swap stops with an
error naming the module. A model reading no stride-32 map (mmpose's top-down HRNet: one
stride-4 map fusing all its scales) is refused: EVT's later stages would run for nothing.

``--recipe evt`` takes the optimizer (AdamW, lr, weight decay, no-decay rules), the backbone's
drop path and norm (SyncBN) from our own config of the same family and arch
(:data:`FAMILY_CONFIGS`), loaded with mmengine; query-based models (DETR family, Sparse R-CNN,
MaskFormer / Mask2Former, KNet) keep their own AdamW recipe, since none of our families
matches them (see :func:`recipe_family`), nor do mmpose's bottom-up models (our pose
family is top-down); mmaction2's 2D recognizers take our TSN config's (mmaction2's own
TSN recipe). mmaction2's 2D recognizers (TSN) get ``type='mmpretrain.EVT'``, the prefix
for which Recognizer2D unpacks a backbone's tuple of maps, and their ``cls_head`` is the
consumer; TSM (a temporal shift inside the backbone, which a 2D EVT would silently drop)
and the 3D, audio and skeleton recognizers are refused with the reason
(:mod:`mmevt.toolkits.mmaction`). ``--check`` builds the written config, runs one
training step and one prediction on a generated batch and prints params / FLOPs before and
after (:func:`smoke_test_config`); SRC's model is then built once, for the probe and the
counts.

The package, one module per step:

- :mod:`.probe`: build and run SRC's backbone, map its outputs' strides onto EVT stages;
- :mod:`.consumers`: the neck / heads that read the backbone, their channels remapped;
- :mod:`.recipes`: our family's optimizer, schedule and backbone settings;
- :mod:`.plan`: :class:`SwapPlan` (what DST overrides and why), :func:`plan_swap`,
  :func:`swap_config`;
- :mod:`.config_source`: a general writer of Python config source; :mod:`.render` writes
  a plan with it;
- :mod:`.smoke`: the smoke test (``--check``);
- :mod:`.cli`: the ``mmevt-swap`` command.

What differs by toolkit (the refusals, the backbone type, the recipe's family, the smoke
batch: mmpose's through the config's own pipelines, mmaction2's clips, mmrotate's oriented
boxes) each toolkit's module in :mod:`mmevt.toolkits` says.
"""
from .cli import build_parser, cli, main
from .config_source import comment_lines, deep_update, format_value, nest_override
from .consumers import CHANNEL_KEYS, CONCAT_NECKS, HEAD_KEYS, concatenated_outputs, \
    dotted_path, find_consumers, remap_channels, remap_featuremap_size
from .plan import IMAGENET_MEAN, IMAGENET_STD, Override, SwapPlan, load_src, plan_swap, \
    swap_config
from .probe import EVT_STRIDES, PROBE_SIZE, BackboneOutputs, build_source_model, \
    map_outputs, measure_backbone
from .recipes import FAMILY_CONFIGS, QUERY_BASED_HEADS, QUERY_BASED_MODELS, \
    SHARED_RECIPE_ARCH, apply_recipe, canonical_arch, family_config, query_based, \
    recipe_family
from .render import render
from .smoke import CheckResult, SmokeTestResult, check_config, check_size, flops_or_none, \
    runner_model_cfg, smoke_test_config, smoke_test_size

__all__ = [
    'BackboneOutputs', 'CHANNEL_KEYS', 'CONCAT_NECKS', 'CheckResult', 'EVT_STRIDES',
    'FAMILY_CONFIGS', 'HEAD_KEYS', 'IMAGENET_MEAN', 'IMAGENET_STD', 'Override',
    'PROBE_SIZE', 'QUERY_BASED_HEADS', 'QUERY_BASED_MODELS', 'SHARED_RECIPE_ARCH',
    'SmokeTestResult', 'SwapPlan', 'apply_recipe', 'build_parser', 'build_source_model',
    'canonical_arch', 'check_config', 'check_size', 'cli', 'comment_lines',
    'concatenated_outputs', 'deep_update', 'dotted_path', 'family_config',
    'find_consumers', 'flops_or_none', 'format_value', 'load_src', 'main', 'map_outputs',
    'measure_backbone', 'nest_override', 'plan_swap', 'query_based', 'recipe_family',
    'remap_channels', 'remap_featuremap_size', 'render', 'runner_model_cfg',
    'smoke_test_config', 'smoke_test_size', 'swap_config'
]
