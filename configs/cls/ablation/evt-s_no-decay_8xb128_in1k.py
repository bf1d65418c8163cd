# Token-mixer ablation of EVT-S on ImageNet-1k: no spatial decay (plain attention), grouping
# unchanged.
# Everything else is evt-s_8xb128_in1k.py.
_base_ = '../evt/evt-s_8xb128_in1k.py'

model = dict(backbone=dict(decay='none'))
