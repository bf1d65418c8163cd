# RMT-L (the authors' classifier) on ImageNet-1k: evaluate the authors' checkpoint
# converted with tools/model_converters/rmt_to_mmevt.py, or retrain with EVT's recipe.
_base_ = '../evt/evt-t_8xb128_in1k.py'

model = dict(
    backbone=dict(arch='rmt-l', drop_path_rate=None),
    neck=dict(in_channels=640))
