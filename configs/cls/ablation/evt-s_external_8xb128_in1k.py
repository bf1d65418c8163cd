# Token-mixer ablation of EVT-S on ImageNet-1k: External Attention (64 memory slots) in stages
# 1-3, full EuSA in stage 4.
# Everything else is evt-s_8xb128_in1k.py.
_base_ = '../evt/evt-s_8xb128_in1k.py'

model = dict(backbone=dict(mixers=[dict(type='external', memory_size=64)] * 3 + ['full']))
