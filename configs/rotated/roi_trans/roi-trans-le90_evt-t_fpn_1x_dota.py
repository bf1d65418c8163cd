# RoI Transformer + FPN with an EVT-T backbone on DOTA v1.0, 1x schedule, le90 angles:
# mmrotate's own Swin-T recipe (mmrotate::roi_trans/roi-trans-le90_swin-tiny_fpn_1x_dota.py,
# its R50 recipe with the backbone swapped and 1 image a GPU) with the backbone swapped;
# everything else is inherited unchanged from it: the schedule, data and optimizer of
# ../oriented_rcnn/oriented-rcnn-le90_evt-t_fpn_1x_dota.py (the same in both recipes) but
# batch 1 a GPU. What changes: the backbone, the FPN's in_channels and the optimizer's
# per-parameter rules written for EVT's names (../_base_/evt-t_swin-t-recipe.py).
# docs/rotated.md.
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmrotate::roi_trans/roi-trans-le90_swin-tiny_fpn_1x_dota.py',
    '../_base_/evt-t_swin-t-recipe.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

pretrained = {{_base_.evt_t_pretrained}}  # the recipe names Swin-T's URL here; nothing downloads

model = dict(backbone={{_base_.evt_t_backbone}}, neck=dict(in_channels={{_base_.evt_t_channels}}))
optim_wrapper = {{_base_.evt_t_optim_wrapper}}
