# Token-mixer ablation of EVT-S on ImageNet-1k: 2D windows instead of 1D groups. Stages 1-3
# alternate 7x7 windows and 7x7 strided grids (the 2D counterparts of EuSA-g / EuSA-d, same
# 49 tokens per group as EVT-S's 1D groups), full EuSA in stage 4.
# Everything else is evt-s_8xb128_in1k.py.
_base_ = '../evt/evt-s_8xb128_in1k.py'

model = dict(backbone=dict(mixers=['window_grid'] * 3 + ['full']))
