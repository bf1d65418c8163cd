# Instance segmentation (Mask R-CNN, Cascade Mask R-CNN) for ONNX Runtime, static 800 x 1344:
# mmdeploy v1.3.1's configs/mmdet/_base_/base_instance-seg_static.py on our detection config.
# The graph returns each detection's 28 x 28 mask probabilities; pasting them into the image
# stays outside the graph (export_postprocess_mask=False, mmdeploy's default).
_base_ = ['./detection_onnxruntime_static-800x1344.py']

onnx_config = dict(output_names=['dets', 'labels', 'masks'])
codebase_config = dict(post_processing=dict(export_postprocess_mask=False))
