# UperNet, EVT-T, 160k, with layer-wise lr decay (opt-in example): the evt-t UperNet recipe
# (authors' lr 6e-5, wd 0.01, no decay on '*norm*') and mmevt's
# EVTLayerDecayOptimWrapperConstructor, which scales the backbone's lr by depth
# (EVT.get_layer_depth: stem 0, one id per block, 18 ids for EVT-T) and keeps the decode
# and auxiliary heads at the base lr; the inherited no-decay rules stay as they are.
# Rate 0.9: mmseg's ConvNeXt UperNet (configs/convnext/
# convnext-tiny_upernet_8xb2-amp-160k_ade20k-512x512.py, decay_type 'stage_wise') and
# BEiT UperNet (configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py). Their ids
# are stages (ConvNeXt, stem at 0.9^7 = 0.48 x lr) or 12 blocks (BEiT, 0.9^13 = 0.25);
# ours are per block, so EVT-T's stem trains at 0.9^17 = 0.17 x lr. Ours: the rate is
# not tuned for EVT, and the RMT authors' recipe has no layer decay.
_base_ = './upernet_evt-t_8xb2-160k_ade20k-512x512.py'

optim_wrapper = dict(
    constructor='EVTLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.9))
