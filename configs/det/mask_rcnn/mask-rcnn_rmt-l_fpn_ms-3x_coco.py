# Mask R-CNN + FPN, RMT-L, ms-3x: the evt-t config of this family with the
# backbone swapped. The RMT authors' RMT-L recipe:
# qhfan/RMT detect/configs/RMT/maskrcnn_l_3x.py: lr 2e-4.
# Drop path 0.5: the authors' ImageNet and detection value for RMT-L.
# Batch: the authors' L 3x runs 1 image per GPU (8 in total) at lr 2e-4; we follow
# theirs (base_batch_size 8 for --auto-scale-lr).
# Output norms: LayerNorm eps 1e-5 like the authors' detection backbone (their
# extra_norms are nn.LayerNorm defaults), so their COCO checkpoints load as they are.
_base_ = './mask-rcnn_evt-t_fpn_ms-3x_coco.py'

pretrained = 'checkpoints/rmt-l_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='rmt-l', drop_path_rate=0.5, init_cfg=dict(checkpoint=pretrained),
                  out_norm_cfg=dict(type='LN', eps=1e-5)),
    neck=dict(in_channels=[112, 224, 448, 640]))
optim_wrapper = dict(optimizer=dict(lr=2e-4))
train_dataloader = dict(batch_size=1, num_workers=1)
auto_scale_lr = dict(base_batch_size=8)
