# EVT-S on ImageNet-1k at 224: evt-t_8xb128_in1k.py's recipe, drop path 0.15 (paper).
_base_ = './evt-t_8xb128_in1k.py'

model = dict(
    backbone=dict(arch='evt-s', drop_path_rate=0.15),
    neck=dict(in_channels=512))
