# Rotated RetinaNet + FPN with an EVT-T backbone on DOTA v1.0, 1x schedule, le90 angles,
# rotated-box regression. mmrotate has no Swin-T recipe for it: this is its R50 recipe
# (mmrotate::rotated_retinanet/rotated-retinanet-rbox-le90_r50_fpn_1x_dota.py) with the
# backbone swapped as in its Swin-T recipes of the two-stage detectors, whose optimizer it
# takes (ours: a transformer backbone is not trained with the R50 recipe's SGD lr 0.0025;
# mmrotate's ConvNeXt-T RetinaNet recipe also moves to AdamW). Inherited unchanged from the
# R50 recipe: the head (anchors 4 x 2^(k/3) x stride, ratios 0.5 / 1 / 2, focal loss, L1 on
# the deltas, rotated-IoU assigner at 0.5 / 0.4), rotated NMS at 0.1, the schedule (12
# epochs, warm-up 500 iterations, steps 8 / 11, clipping at norm 35), the data and batch 2
# a GPU. What changes: the backbone, the FPN (below), the optimizer
# (../_base_/evt-t_swin-t-recipe.py: AdamW lr 1e-4, weight decay 0.05, backbone at 0.1 x lr,
# no decay on norms). docs/rotated.md.
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmrotate::rotated_retinanet/rotated-retinanet-rbox-le90_r50_fpn_1x_dota.py',
    '../_base_/evt-t_swin-t-recipe.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

model = dict(
    # the recipe's FPN reads stages 2-4 (start_level 1 of R50's four): EVT returns those three
    # and the FPN starts at 0, the same network without stage 1's unused output norm (as our
    # configs/det/retinanet ones)
    backbone={{_base_.evt_t_backbone_stages_2_4}},
    neck=dict(in_channels={{_base_.evt_t_channels_stages_2_4}}, start_level=0))
optim_wrapper = {{_base_.evt_t_optim_wrapper}}
