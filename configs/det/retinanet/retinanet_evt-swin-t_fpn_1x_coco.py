# RetinaNet + FPN, EVT-SWIN-T, 1x: Swin's recipe, as the paper's strictly aligned comparison
# asks: AdamW lr 1e-4, wd 0.05 with no decay on norms (Swin's detection optimizer, as in
# its Mask R-CNN / Cascade recipes: the Swin paper has no RetinaNet run, and mmdet's
# configs/swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py trains with its schedule's SGD);
# warm-up 500 iterations (that config's schedule_1x), drop path 0.2, stages 2-4 out.
_base_ = './retinanet_evt-t_fpn_1x_coco.py'

pretrained = 'checkpoints/evt-swin-t_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-swin-t', drop_path_rate=0.2, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[192, 384, 768]))
optim_wrapper = dict(
    optimizer=dict(lr=1e-4, weight_decay=0.05),
    # Swin's rule, by name: no decay on parameters named '*norm*' (Swin's configs)
    paramwise_cfg=dict(custom_keys={'norm': dict(decay_mult=0.)}))
