# RMT-B* (the authors' token-labelled RMT-B) on ImageNet-1k, for evaluating their file
# converted with tools/model_converters/rmt_to_mmevt.py (see docs/checkpoints.md):
# rmt-s-tl_8xb128_in1k.py (their logits, their 233 -> 224 evaluation) with RMT-B's backbone.
_base_ = './rmt-s-tl_8xb128_in1k.py'

model = dict(
    backbone=dict(arch='rmt-b'),
    neck=dict(in_channels=512),
    head=dict(token_channels=512))
