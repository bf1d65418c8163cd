# Oriented R-CNN + FPN with an EVT-T backbone on DOTA v1.0, 1x schedule, le90 angles:
# mmrotate's own Swin-T recipe (mmrotate::oriented_rcnn/oriented-rcnn-le90_swin-tiny_fpn_1x_dota.py,
# its R50 recipe with the backbone swapped) with the backbone swapped; everything else is
# inherited unchanged from it:
#   AdamW lr 1e-4, weight decay 0.05, backbone at 0.1 x lr, no decay on norms, gradient
#   clipping at norm 35; 12 epochs, linear warm-up 500 iterations from lr / 3, lr x0.1 after
#   epochs 8 and 11; batch 2 a GPU (the recipe's);
#   DOTA split into 1024 x 1024 patches with a gap of 200 (mmrotate's
#   tools/data/dota/split/split_configs/ss_*.json), resized to 1024 x 1024, flips
#   (horizontal, vertical, diagonal) with probability 0.75; DOTAMetric mAP at IoU 0.5.
# What changes: the backbone and the FPN's in_channels (../_base_/evt-t_swin-t-recipe.py, with
# each number's source), and the optimizer's per-parameter rules written for EVT's names.
# Multi-GPU: tools/dist_train.sh THIS_CONFIG N (mmrotate's tools, or mmevt-train).
# docs/rotated.md.
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmrotate::oriented_rcnn/oriented-rcnn-le90_swin-tiny_fpn_1x_dota.py',
    '../_base_/evt-t_swin-t-recipe.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

pretrained = {{_base_.evt_t_pretrained}}  # the recipe names Swin-T's URL here; nothing downloads

model = dict(backbone={{_base_.evt_t_backbone}}, neck=dict(in_channels={{_base_.evt_t_channels}}))
optim_wrapper = {{_base_.evt_t_optim_wrapper}}
