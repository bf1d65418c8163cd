# Token-mixer ablation of EVT-S with Semantic FPN on ADE20K: no spatial decay (plain
# attention), grouping unchanged.
# Everything else is fpn_evt-s_8xb2-80k_ade20k-512x512.py.
_base_ = '../sem_fpn/fpn_evt-s_8xb2-80k_ade20k-512x512.py'

model = dict(backbone=dict(decay='none'))
