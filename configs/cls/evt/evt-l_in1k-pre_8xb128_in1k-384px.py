# EVT-L fine-tuned at 384x384 from its 224 checkpoint: the EVT-B 384 recipe.
_base_ = './evt-b_in1k-pre_8xb128_in1k-384px.py'

load_from = 'checkpoints/evt-l_in1k.pth'  # noqa: the 224 checkpoint to start from
model = dict(
    backbone=dict(arch='evt-l', drop_path_rate=0.55),
    neck=dict(in_channels=640))
