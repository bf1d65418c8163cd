"""``CascadeRoIHead.predict_bbox`` for the ONNX Runtime backend, also for heads that
regress per class.

mmdeploy's rewriter of ``CascadeRoIHead.predict_bbox``
(``mmdeploy/codebase/mmdet/models/roi_heads/cascade_roi_head.py``) asserts
``reg_class_agnostic`` for the stages before the last; our Cascade configs regress per class
(the RMT authors' heads). :func:`cascade_roi_head__predict_bbox__onnxruntime` gives
mmdeploy's rewriter each such stage's deltas of its arg-max class (mmdet's
``regress_by_class`` in ``CascadeRoIHead._refine_roi``) and runs it unchanged otherwise.
"""
from typing import List, Tuple

from torch import Tensor

TARGET = 'mmdet.models.roi_heads.cascade_roi_head.CascadeRoIHead.predict_bbox'


def cascade_roi_head__predict_bbox__onnxruntime(
        self, x: Tuple[Tensor], batch_img_metas: List[dict], rpn_results_list: List[Tensor],
        rcnn_test_cfg, rescale: bool = False, **kwargs) -> List[Tensor]:
    """mmdeploy's ``CascadeRoIHead.predict_bbox`` rewriter, also for heads that regress per
    class: between stages, the deltas of each RoI's arg-max class (background excluded), as
    mmdet's ``CascadeRoIHead._refine_roi`` / ``BBoxHead.regress_by_class`` do.

    Args and returns: those of mmdet's ``CascadeRoIHead.predict_bbox`` under mmdeploy.
    """
    from mmdeploy.codebase.mmdet.models.roi_heads.cascade_roi_head import \
        cascade_roi_head__predict_bbox as mmdeploy_predict_bbox
    per_class = [i for i, head in enumerate(self.bbox_head[:-1])
                 if not head.reg_class_agnostic]
    forward = self._bbox_forward

    def bbox_forward(stage: int, feats, rois: Tensor, **kw) -> dict:
        results = forward(stage, feats, rois, **kw)
        if stage in per_class:
            deltas = results['bbox_pred']  # (RoIs, classes * 4)
            label = results['cls_score'][:, :-1].argmax(dim=1)
            deltas = deltas.reshape(deltas.size(0), -1, 4)
            deltas = deltas.gather(1, label[:, None, None].expand(-1, 1, 4)).squeeze(1)
            results = dict(results, bbox_pred=deltas)
        return results

    self._bbox_forward = bbox_forward  # this call only: the attribute is removed below
    for i in per_class:
        self.bbox_head[i].reg_class_agnostic = True
    try:
        return mmdeploy_predict_bbox(self, x, batch_img_metas, rpn_results_list,
                                     rcnn_test_cfg, rescale=rescale, **kwargs)
    finally:
        del self._bbox_forward
        for i in per_class:
            self.bbox_head[i].reg_class_agnostic = False
