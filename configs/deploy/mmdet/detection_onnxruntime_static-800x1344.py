# Detection (RetinaNet, or a two-stage detector's boxes only) for ONNX Runtime, static
# 800 x 1344 input (H x W): mmdeploy v1.3.1's configs/mmdet/_base_/base_static.py with
# input_shape set as in its *_static-800x1344 configs (mmdet's 1333 x 800 test scale, rounded
# up to the pad divisor 32). input_shape is [W, H]. All axes are static: EVT's grid-dependent
# constants are traced for one size (docs/deployment.md).
_base_ = ['../_base_/onnxruntime.py']

onnx_config = dict(output_names=['dets', 'labels'], input_shape=[1344, 800])
codebase_config = dict(
    _scope_='mmdeploy',
    type='mmdet',
    task='ObjectDetection',
    model_type='end2end',
    # mmdeploy's defaults (base_static.py); the model's own test_cfg (score_thr, nms
    # iou_threshold, max_per_img) takes precedence where mmdeploy's rewriters read it
    post_processing=dict(
        score_threshold=0.05,
        confidence_threshold=0.005,  # YOLOv3 only
        iou_threshold=0.5,
        max_output_boxes_per_class=200,
        pre_top_k=5000,
        keep_top_k=100,
        background_label_id=-1,
    ))
