# What the EVT-T configs of configs/rotated share: EVT-T in place of Swin-T in mmrotate's
# Swin-T DOTA recipes (mmrotate::oriented_rcnn/oriented-rcnn-le90_swin-tiny_fpn_1x_dota.py and
# roi_trans/roi-trans-le90_swin-tiny_fpn_1x_dota.py, identical in these settings). A sibling
# base of a recipe: its names are its own (mmengine refuses a key two bases both set), and a
# config reads them as {{_base_.evt_t_backbone}} / {{_base_.evt_t_optim_wrapper}}.

# ImageNet-1k checkpoint of the backbone: replace with your file (an mmevt classifier
# checkpoint, e.g. from tools/model_converters/rmt_to_mmevt.py or configs/cls/*).
evt_t_pretrained = 'checkpoints/evt-t_in1k.pth'  # noqa
# Typed dicts say their scope, so a config inheriting ours as 'mmevt::rotated/...' does not
# look them up in a scope 'mmevt' (mmengine stamps a package's name on inherited dicts).
evt_t_backbone = dict(
    _delete_=True,  # the recipe's Swin-T (or ResNet-50) settings do not apply to EVT
    _scope_='mmrotate',
    type='EVT',  # registered in mmrotate's MODELS by import mmevt (mmevt.registry)
    arch='evt-t',
    drop_path_rate=0.1,  # EVT-T's ImageNet value (our arch table; the recipe's 0.2 is Swin-T's)
    out_indices=(0, 1, 2, 3),  # the recipe's FPN reads all four stages
    # SyncBN in the conv stem and downsampling: our detection configs' (the RMT authors'
    # detection backbone); the recipe's Swin-T has LayerNorms only
    norm_cfg=dict(type='SyncBN', requires_grad=True),
    init_cfg=dict(type='Pretrained', checkpoint=evt_t_pretrained, prefix='backbone.'))
evt_t_channels = [64, 128, 256, 512]  # EVT-T's stage widths (the recipe's Swin-T: 96 ... 768)
# for an FPN that reads stages 2-4 only (RetinaNet's): EVT returns just those, so no stage has
# an output nobody uses (distributed training would stop at its norm's missing gradients)
evt_t_backbone_stages_2_4 = dict(evt_t_backbone, out_indices=(1, 2, 3))
evt_t_channels_stages_2_4 = evt_t_channels[1:]

# The recipe's optimizer: AdamW lr 1e-4, betas (0.9, 0.999), weight decay 0.05; the backbone
# at 0.1 x lr; no decay on norms, and the backbone's norms at 0.1 x lr too (the recipe lists
# Swin-T's norms by name: the patch embedding's, every block's, every merging layer's and the
# outputs'; here EVT's: the stem's, every block's norm1 / norm2, every downsampling layer's
# and the outputs' norm0 ... norm3, for the blocks of every EVT arch, so that `mmevt-swap
# --recipe evt` gives any arch the same rule: EVT-B / EVT-L have the deepest stages). The
# recipe's position-embedding keys have no EVT counterpart (EVT's position encoding is a
# depth-wise conv). Gradient clipping at norm 35 is the recipe's schedule_1x's, kept.
evt_norm = dict(lr_mult=0.1, decay_mult=0.0)
evt_custom_keys = {'backbone': dict(lr_mult=0.1, decay_mult=1.0), 'backbone.norm': evt_norm,
                   'backbone.stem.norm': evt_norm}  # the EVT-Swin archs' patch embedding
evt_custom_keys.update({f'backbone.stem.{i}.norm': evt_norm for i in range(4)})  # conv stem
evt_custom_keys.update({
    f'backbone.stages.{stage}.blocks.{block}.norm': evt_norm
    for stage, depth in enumerate([4, 8, 25, 8])  # the deepest of each stage (EVT-B / L)
    for block in range(depth)
})
evt_custom_keys.update(
    {f'backbone.stages.{stage}.downsample.norm': evt_norm for stage in range(1, 4)})
evt_t_optim_wrapper = dict(
    optimizer=dict(_delete_=True, _scope_='mmrotate', type='AdamW', lr=0.0001,
                   betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(_delete_=True, custom_keys=evt_custom_keys, norm_decay_mult=0.0))
