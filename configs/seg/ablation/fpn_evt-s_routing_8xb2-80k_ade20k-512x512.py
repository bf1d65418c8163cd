# Token-mixer ablation of EVT-S with Semantic FPN on ADE20K: BiFormer's Bi-Level Routing
# Attention (7x7 regions, top-k 1/4/16) in stages 1-3, full EuSA in stage 4.
# Everything else is fpn_evt-s_8xb2-80k_ade20k-512x512.py.
_base_ = '../sem_fpn/fpn_evt-s_8xb2-80k_ade20k-512x512.py'

model = dict(backbone=dict(
    mixers=[dict(type='routing', n_win=7, topk=k) for k in (1, 4, 16)] + ['full']))
