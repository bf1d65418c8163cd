# RMT-L* (the authors' token-labelled RMT-L) on ImageNet-1k, for evaluating their file
# converted with tools/model_converters/rmt_to_mmevt.py (see docs/checkpoints.md):
# rmt-s-tl_8xb128_in1k.py (their logits, their 233 -> 224 evaluation) with RMT-L's backbone.
_base_ = './rmt-s-tl_8xb128_in1k.py'

model = dict(
    backbone=dict(arch='rmt-l'),
    neck=dict(in_channels=640),
    head=dict(token_channels=640))
