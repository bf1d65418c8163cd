# Token-mixer ablation of EVT-S on ImageNet-1k: BiFormer's Bi-Level Routing Attention
# (7x7 regions, top-k 1/4/16) in stages 1-3, full EuSA in stage 4.
# Everything else is evt-s_8xb128_in1k.py.
_base_ = '../evt/evt-s_8xb128_in1k.py'

model = dict(backbone=dict(
    mixers=[dict(type='routing', n_win=7, topk=k) for k in (1, 4, 16)] + ['full']))
