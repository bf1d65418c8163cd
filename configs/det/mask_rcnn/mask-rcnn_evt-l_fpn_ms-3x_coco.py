# Mask R-CNN + FPN, EVT-L, ms-3x: the evt-t config of this family with the
# backbone swapped. The RMT authors' RMT-L recipe (EVT-L follows RMT-L):
# qhfan/RMT detect/configs/RMT/maskrcnn_l_3x.py: lr 2e-4.
# Drop path 0.55: EVT-L's ImageNet value (paper); like the authors, detection
# reuses the backbone's ImageNet drop path (RMT-L: 0.5).
# Batch: the authors' L 3x runs 1 image per GPU (8 in total) at lr 2e-4; we follow
# theirs (base_batch_size 8 for --auto-scale-lr).
_base_ = './mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/evt-l_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-l', drop_path_rate=0.55, init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[112, 224, 448, 640]))
optim_wrapper = dict(optimizer=dict(lr=2e-4))
train_dataloader = dict(batch_size=1, num_workers=1)
auto_scale_lr = dict(base_batch_size=8)
