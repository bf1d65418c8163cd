# RMT-S* (the authors' token-labelled RMT-S) on ImageNet-1k, for evaluating their file
# converted with tools/model_converters/rmt_to_mmevt.py (see docs/checkpoints.md). The
# logits are theirs: class head + 0.5 * max over tokens of the token head. Evaluation only:
# training needs token labels (RMTTokenLabelClsHead.loss raises).
_base_ = './rmt-s_8xb128_in1k.py'

model = dict(
    neck=dict(return_tokens=True),
    head=dict(
        _delete_=True,
        type='RMTTokenLabelClsHead',
        num_classes=1000,
        in_channels=1024,
        token_channels=512,
        aux_weight=0.5),
    train_cfg=None)

# The authors evaluate these models at crop_pct 0.96: bicubic resize of the short side to
# int(224 / 0.96) = 233, then a 224 centre crop (the plain models use 256 -> 224).
test_pipeline = [
    dict(_scope_='mmpretrain', type='LoadImageFromFile'),
    dict(_scope_='mmpretrain', type='ResizeEdge', scale=233, edge='short', backend='pillow',
         interpolation='bicubic'),
    dict(_scope_='mmpretrain', type='CenterCrop', crop_size=224),
    dict(_scope_='mmpretrain', type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
