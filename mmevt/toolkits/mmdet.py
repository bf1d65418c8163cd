"""mmdet (object detection, instance and panoptic segmentation): what mmevt knows and does
for it."""
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .base import Toolkit, random_images
from .config_values import to_plain


def training_annotations(cfg) -> Dict[str, bool]:
    """Which annotations the config's training pipeline loads (masks, semantic maps), read
    from its ``LoadAnnotations`` / ``LoadPanopticAnnotations`` step (heads that do not
    train on masks may break on them, e.g. RTMDet's assigner)."""
    found = dict(with_mask=False, with_seg=False)

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            kind = v.get('type')
            if kind == 'LoadPanopticAnnotations':
                found['with_mask'] |= v.get('with_mask', True)
                found['with_seg'] |= v.get('with_seg', True)
            elif kind == 'LoadAnnotations':
                found['with_mask'] |= bool(v.get('with_mask', False))
                found['with_seg'] |= bool(v.get('with_seg', False))
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
    walk(to_plain(cfg.get('train_dataloader', {})))
    return found


def image_metas(hw: Tuple[int, int]) -> List[Any]:
    """One ``DetDataSample`` carrying the image metas a detector's RPN reads, for an input
    of ``hw`` (mmdet's and mmrotate's detectors)."""
    from mmdet.structures import DetDataSample
    return [DetDataSample(metainfo=dict(img_shape=hw, ori_shape=hw, pad_shape=hw,
                                        batch_input_shape=hw, scale_factor=(1., 1.)))]


class MMDet(Toolkit):
    """mmdet. COCO's 1280 x 800 is the FLOP shape Swin, RMT and EVT quote."""
    scope = 'mmdet'
    package = 'mmdet'
    configs = 'det'
    docs = 'detection'
    requirements = dict(upstream='requirements/upstream.txt', fork='requirements/fork.txt')
    demo_data = 'generate_shapes'
    probe_size = 128
    flops_shape = (800, 1280)
    backbone_family = 'mask_rcnn'
    deploy_task = 'ObjectDetection'
    onnx_kind = ''
    onnx_refusal = ('is an mmdet detector: its post-processing (NMS, RoI heads) needs '
                    'mmdeploy; export the backbone with --backbone-only')
    tables_count_features_only = True

    def recipe_family(self, model_cfg: Mapping) -> Optional[str]:
        """A cascade RoI head -> ``cascade``, another RoI head -> ``mask_rcnn`` (two-stage
        detectors), no RoI head -> ``retinanet`` (dense one-stage heads)."""
        roi = model_cfg.get('roi_head')
        if not roi:
            return 'retinanet'
        return 'cascade' if roi.get('type') == 'CascadeRoIHead' else 'mask_rcnn'

    def make_batch(self, cfg, model_cfg: Mapping, size: int, batch: int,
                   classes: int) -> dict:
        """mmdet's ``demo_mm_inputs`` with 3 objects an image, and the masks / semantic maps
        the training pipeline loads (:func:`training_annotations`)."""
        from mmdet.testing import demo_mm_inputs
        ann = training_annotations(cfg)
        data = demo_mm_inputs(batch, [(3, size, size)] * batch, num_items=[3] * batch,
                              num_classes=classes, with_mask=ann['with_mask'],
                              with_semantic=ann['with_seg'])
        data['inputs'] = random_images(size, batch)
        return data

    def flops_data_samples(self, hw: Tuple[int, int]) -> Optional[list]:
        return image_metas(hw)

    def check_deploy_outputs(self, model_cfg, output_names: Sequence[str]) -> None:
        """A model with a mask head needs an instance-seg deploy config (``masks`` among
        the outputs), one without a detection deploy config."""
        has_mask = bool(model_cfg.model.get('roi_head', {}).get('mask_head'))
        if has_mask != ('masks' in output_names):
            need = 'an instance-seg' if has_mask else 'a detection'
            raise ValueError(f'{model_cfg.model.type} {"has" if has_mask else "has no"} mask '
                             f'head: use {need} deploy config (output_names '
                             f'{output_names} given)')


TOOLKIT = MMDet()
