"""Moved to :mod:`mmevt.deploy.rewriters` (one module per target); an alias for one release."""
from .deploy.rewriters import mmdeploy_compat
from .deploy.rewriters.adaptive_pool import \
    adaptive_avg_pool2d__onnxruntime as adaptive_avg_pool2d
from .deploy.rewriters.cascade_roi_head import \
    cascade_roi_head__predict_bbox__onnxruntime as cascade_roi_head_predict_bbox
from .deploy.rewriters.scaled_dot_product_attention import \
    scaled_dot_product_attention__onnxruntime as scaled_dot_product_attention

__all__ = ['adaptive_avg_pool2d', 'cascade_roi_head_predict_bbox', 'mmdeploy_compat',
           'scaled_dot_product_attention']
