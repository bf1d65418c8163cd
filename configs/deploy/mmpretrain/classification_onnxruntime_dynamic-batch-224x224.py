# Image classification for ONNX Runtime, 224 x 224 with a dynamic batch. Only the batch is
# dynamic: H and W stay static (docs/deployment.md); the batch is checked against PyTorch at
# batch 1 and 2 (tests/test_deploy.py).
_base_ = ['./classification_onnxruntime_static-224x224.py']

onnx_config = dict(dynamic_axes=dict(input={0: 'batch'}, output={0: 'batch'}))
