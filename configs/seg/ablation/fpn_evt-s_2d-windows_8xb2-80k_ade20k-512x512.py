# Token-mixer ablation of EVT-S with Semantic FPN on ADE20K: 2D windows instead of 1D groups.
# Stages 1-3 alternate 7x7 windows and 7x7 strided grids (the 2D counterparts of EuSA-g /
# EuSA-d, same 49 tokens per group), full EuSA in stage 4.
# Everything else is fpn_evt-s_8xb2-80k_ade20k-512x512.py.
_base_ = '../sem_fpn/fpn_evt-s_8xb2-80k_ade20k-512x512.py'

model = dict(backbone=dict(mixers=['window_grid'] * 3 + ['full']))
