# Top-down heatmap, EVT-S, COCO 256 x 192: the evt-t config of this folder (mmpose's Swin-T
# recipe) with the backbone swapped.
# Drop path 0.15: EVT-S's ImageNet value (our arch table; = RMT-S's). EVT-S has EVT-T's
# widths, so the head's in_channels (512) is inherited.
_base_ = './td-hm_evt-t_8xb32-210e_coco-256x192.py'

pretrained = 'checkpoints/evt-s_in1k.pth'  # noqa: your ImageNet checkpoint
model = dict(
    backbone=dict(arch='evt-s', drop_path_rate=0.15, init_cfg=dict(checkpoint=pretrained)),
    head=dict(in_channels=512))
