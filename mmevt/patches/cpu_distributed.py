"""CPU multi-process training with mmengine's pytorch launcher.

mmengine 0.10.7's ``_init_dist_pytorch`` always calls ``torch.cuda.set_device``, so
``tools/dist_train.sh CONFIG N`` fails on a machine without GPUs even with the gloo backend.
:func:`enable_cpu_distributed` keeps mmengine's code path for every accelerator and only
skips the CUDA call when no CUDA device exists and the backend is gloo. Such a run also
needs ``model_wrapper_cfg = dict(type='MMDistributedDataParallel', device_ids=None)`` (a CPU
module takes no device ids) and ``env_cfg = dict(dist_cfg=dict(backend='gloo'))``.
"""


def enable_cpu_distributed() -> None:
    """Patch mmengine's pytorch-launcher initialisation for CPU + gloo. Idempotent."""
    import mmengine.dist.utils as dist_utils
    import torch
    import torch.distributed as torch_dist
    original = dist_utils._init_dist_pytorch
    if getattr(original, '_mmevt_cpu', False):
        return

    def _init_dist_pytorch(backend, init_backend='torch', **kwargs) -> None:
        if backend == 'gloo' and init_backend == 'torch' and not torch.cuda.is_available():
            torch_dist.init_process_group(backend='gloo', **kwargs)
            return
        original(backend, init_backend=init_backend, **kwargs)

    _init_dist_pytorch._mmevt_cpu = True
    dist_utils._init_dist_pytorch = _init_dist_pytorch
