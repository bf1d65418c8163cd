# Semantic segmentation (Semantic FPN, UperNet) for ONNX Runtime, static 512 x 512 input:
# mmdeploy v1.3.1's configs/mmseg/segmentation_onnxruntime_static-512x512.py (ADE20K's crop
# size). The graph returns the per-pixel class index (with_argmax) at the input size.
_base_ = ['../_base_/onnxruntime.py']

onnx_config = dict(input_shape=[512, 512])
codebase_config = dict(_scope_='mmdeploy', type='mmseg', task='Segmentation', with_argmax=True)
