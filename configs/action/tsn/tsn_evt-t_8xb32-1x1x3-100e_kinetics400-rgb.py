# TSN (temporal segment network: 3 segments of 1 frame each, one 2D backbone for every frame,
# the class scores averaged over the segments) with an EVT-T backbone on Kinetics-400 RGB
# videos: the shared recipe of this folder. It is mmaction2's own TSN recipe for a
# transformer backbone (mmaction::recognition/tsn/custom_backbones/
# tsn_imagenet-pretrained-swin-transformer_8xb32-1x1x3-100e_kinetics400-rgb.py, which is its
# R50 recipe with the backbone swapped) with the backbone swapped; everything else is
# inherited unchanged from it:
#   SGD lr 0.01, momentum 0.9, weight decay 1e-4, gradient clipping at norm 40; 100 epochs,
#   lr x0.1 after epochs 40 and 80; batch 256 = 8 GPUs x 32 clips (auto_scale_lr 256);
#   training: 3 segments, short side 256, multi-scale crop to 224 x 224, flip 0.5;
#   validation: 3 segments, centre crop 224; test: 25 segments x ten crops; TSNHead with
#   average pooling, average consensus over the segments, dropout 0.4, score averaging by
#   probability; AccMetric (top-1 / top-5, mean class accuracy); ImageNet RGB normalisation.
# What changes (each number's source on its line below): the backbone and the head's
# in_channels (EVT-T's last-stage width). TSN's head reads one feature map: EVT at 224 x 224
# gives (N x 3 segments, 512, 7, 7) at stride 32 (out_indices=(3, )). Multi-GPU: tools/dist_train.sh THIS_CONFIG 8
# (mmaction2's tools, or mmevt-train). docs/action.md.
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmaction::recognition/tsn/custom_backbones/'
    'tsn_imagenet-pretrained-swin-transformer_8xb32-1x1x3-100e_kinetics400-rgb.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

# ImageNet-1k checkpoint of the backbone: replace with your file (an mmevt classifier
# checkpoint, e.g. from tools/model_converters/rmt_to_mmevt.py or configs/cls/*).
pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa
model = dict(
    backbone=dict(
        _delete_=True,
        # mmaction2's Recognizer2D takes OpenMMLab backbones, which return a tuple of maps,
        # through the 'mmpretrain.' prefix (as its own TSN MobileOne / ResNeXt configs do):
        # built from mmpretrain's registry, where EVT is registered, and the one map unpacked
        type='mmpretrain.EVT',
        arch='evt-t',
        drop_path_rate=0.1,  # EVT-T's ImageNet value (our arch table)
        out_indices=(3, ),  # the stride-32 map only: TSNHead pools one map
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    cls_head=dict(in_channels=512))  # EVT-T's last-stage width (the recipe's Swin-B: 1024)
