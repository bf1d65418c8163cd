# Image classification for ONNX Runtime, static 224 x 224 input: mmdeploy v1.3.1's
# configs/mmpretrain/classification_onnxruntime_static.py with the input size of our
# classification configs' test pipeline (ResizeEdge 256 + CenterCrop 224). The graph returns
# the softmax scores (B, num_classes).
_base_ = ['../_base_/onnxruntime.py']

onnx_config = dict(input_shape=[224, 224])
codebase_config = dict(_scope_='mmdeploy', type='mmpretrain', task='Classification')
