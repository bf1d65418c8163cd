# ONNX export + ONNX Runtime backend, restated from mmdeploy v1.3.1's
# configs/_base_/onnx_config.py and configs/_base_/backends/onnxruntime.py (so that nothing
# here inherits a file the wheel cannot ship). Used by tools/deployment/deploy.py
# (`mmevt-deploy`, mmevt/deploy/mmdeploy_export.py), which exports with the TorchScript exporter.
# `_scope_` pins the dicts that carry a `type` to mmdeploy: mmengine would otherwise give them
# the scope 'mmevt' when a config is inherited through `mmevt::` (docs/own_environment.md).
onnx_config = dict(
    _scope_='mmdeploy',
    type='onnx',
    export_params=True,
    keep_initializers_as_inputs=False,
    # 16, not mmdeploy's default 11: from opset 16 ONNX RoiAlign takes mmcv's aligned=True
    # coordinates (half_pixel); below it onnxruntime enlarges RoIs smaller than one feature
    # pixel to one pixel, which mmcv does not (Cascade's scores differed by 8e-4)
    opset_version=16,
    save_file='end2end.onnx',
    input_names=['input'],
    output_names=['output'],
    input_shape=None,
    # mmdeploy's optional graph passes need its TorchScript extension, which the 1.3.1 wheel
    # does not ship (True would only log a warning)
    optimize=False)
backend_config = dict(_scope_='mmdeploy', type='onnxruntime')
