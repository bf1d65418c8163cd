"""Input sizes of an exported graph: why H and W are static, and the checks of the sizes.

Why H and W are static (said once in the code, here; the other modules refer here, and
``docs/deployment.md`` says it for users): each EVT stage caches its decay bias and group layout
per grid size and pads a last, partial group only when the grid needs it; both are decided
in Python from the concrete H and W.

- torch's own exporter (``torch.onnx.export(dynamo=True)``, i.e. ``torch.export``, used by
  ``mmevt-onnx``) cannot keep such sizes symbolic: asked for dynamic H / W, torch 2.14.1's
  non-strict trace fails and its strict retry fixes H and W to the example's size without an
  error. So ``mmevt-onnx`` exports one file per input size (``--shape H W``, repeatable),
  each with a dynamic batch (measured with torch 2.14.1: onnxruntime matches to ~2e-5), and
  ``--dynamic-hw`` stops with :data:`ONNX_DYNAMIC_HW_ERROR`.
- The TorchScript exporter (``dynamo=False``, which mmdeploy's rewriters need: see
  :mod:`mmevt.deploy.rewriters`) records them as constants of the traced size, so a graph
  exported with dynamic H / W runs at other sizes but computes the wrong attention there.
  ``mmevt-deploy`` refuses a deploy config with dynamic axes 2 or 3
  (:data:`MMDEPLOY_DYNAMIC_HW_ERROR`); a dynamic batch (axis 0) is allowed.

The smallest size is :data:`MIN_SIZE` (EVT has four stride-2 levels).
"""
from typing import Optional, Sequence, Tuple

from ..models.backbones.evt import MIN_INPUT_SIZE as MIN_SIZE

ONNX_DYNAMIC_HW_ERROR = (
    'dynamic H / W cannot be exported: the stages choose their decay bias cache and the '
    'padding of a partial last group from the concrete grid size; export one file per input '
    'size (--shape H W, repeatable), each with a dynamic batch')
MMDEPLOY_DYNAMIC_HW_ERROR = (
    'dynamic H / W is refused: the stages choose their decay bias and the padding of a '
    'partial last group from the concrete grid size, which the TorchScript exporter bakes in '
    'as constants of the traced size, so the graph would run at other sizes with the wrong '
    'attention; use a static deploy config per input size (onnx_config.input_shape=[W, H]; '
    'a dynamic batch, axis 0, is allowed)')


def check_shape(shape: Sequence[int]) -> Tuple[int, int]:
    """``mmevt-onnx``'s ``--shape H W`` validated.

    Args:
        shape (Sequence[int]): ``(H, W)``.

    Returns:
        tuple: ``(H, W)`` as ints.

    Raises:
        ValueError: not two integers >= :data:`MIN_SIZE`.
    """
    if len(shape) != 2 or any(int(s) != s or s < MIN_SIZE for s in shape):
        raise ValueError(f'--shape must be two integers H W >= {MIN_SIZE} (EVT has four '
                         f'stride-2 levels), got {list(shape)}')
    return int(shape[0]), int(shape[1])


def check_deploy_input_shape(shape: Optional[Sequence[int]]) -> None:
    """A deploy config's ``onnx_config.input_shape`` validated (None: not set, allowed).

    Args:
        shape (Sequence[int], optional): ``[W, H]``, mmdeploy's order.

    Raises:
        ValueError: not two integers >= :data:`MIN_SIZE`.
    """
    if shape is not None and (len(shape) != 2 or any(
            not isinstance(s, int) or s < MIN_SIZE for s in shape)):
        raise ValueError(f'onnx_config.input_shape must be [W, H], two integers >= '
                         f'{MIN_SIZE} (EVT has four stride-2 levels), got {shape}')
