# Top-down heatmap pose estimation (SimpleBaseline: the backbone's stride-32 map, three
# deconvolutions, 17 heatmaps) with an EVT-T backbone on COCO person keypoints, 256 x 192
# crops: the shared recipe of this folder. It is mmpose's own Swin-T recipe
# (mmpose::body_2d_keypoint/topdown_heatmap/coco/td-hm_swin-t-p4-w7_8xb32-210e_coco-256x192.py)
# with the backbone swapped; everything else is inherited unchanged from it:
#   Adam lr 5e-4, no weight decay; linear warm-up 500 iterations from 0.001 x lr, 210 epochs,
#   lr x0.1 after epochs 170 and 200; batch 256 = 8 GPUs x 32 (auto_scale_lr 256);
#   MSRAHeatmap codec, input 192 x 256 (w x h), heatmaps 48 x 64, sigma 2; KeypointMSELoss
#   with target weights; flip test on heatmaps; train-time flip, half-body and bbox
#   jitter; person boxes of a detector at test time (COCO_val2017_detections_AP_H_56_person,
#   AP 56 on people); the best checkpoint by coco/AP; ImageNet RGB normalisation.
# What changes (each number's source on its line below): the backbone and the head's
# in_channels (EVT-T's last-stage width). EVT at 256 x 192 gives (B, 512, 8, 6) at stride
# 32; the head's three stride-2 deconvolutions give the 64 x 48 heatmaps.
# Other total batches: pass --auto-scale-lr to scale the lr linearly. Multi-GPU:
# tools/dist_train.sh THIS_CONFIG 8 (mmpose's tools, or mmevt-train). docs/pose.md.
_base_ = [
    '../../_base_/import_mmevt.py',  # first: imports mmevt before the pkg:: bases resolve
    'mmpose::body_2d_keypoint/topdown_heatmap/coco/'
    'td-hm_swin-t-p4-w7_8xb32-210e_coco-256x192.py',
]
custom_imports = dict(imports=['mmevt'], allow_failed_imports=False)

# ImageNet-1k checkpoint of the backbone: replace with your file (an mmevt classifier
# checkpoint, e.g. from tools/model_converters/rmt_to_mmevt.py or configs/cls/*).
pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa
model = dict(
    backbone=dict(
        _delete_=True,
        type='EVT',
        arch='evt-t',
        drop_path_rate=0.1,  # EVT-T's ImageNet value (our arch table), as Swin-T's 0.2 is
        out_indices=(3, ),  # the stride-32 map only, as mmpose's Swin-T (out_indices=(3, ))
        # the conv stem's / downsampling BNs: the recipe's norm_cfg (SyncBN), which Swin,
        # having LayerNorms only, does not use; mmengine reverts it to BN on one process
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    head=dict(in_channels=512))  # EVT-T's last-stage width (Swin-T's is 768)
