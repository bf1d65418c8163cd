# EVT-B on ImageNet-1k at 224: evt-t_8xb128_in1k.py's recipe, drop path 0.4 (paper).
_base_ = './evt-t_8xb128_in1k.py'

model = dict(
    backbone=dict(arch='evt-b', drop_path_rate=0.4),
    neck=dict(in_channels=512))
