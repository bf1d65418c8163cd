# Token-mixer ablation of EVT-S with Semantic FPN on ADE20K: External Attention (64 memory
# slots) in stages 1-3, full EuSA in stage 4.
# Everything else is fpn_evt-s_8xb2-80k_ade20k-512x512.py.
_base_ = '../sem_fpn/fpn_evt-s_8xb2-80k_ade20k-512x512.py'

model = dict(backbone=dict(mixers=[dict(type='external', memory_size=64)] * 3 + ['full']))
