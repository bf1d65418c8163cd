"""mmevt: EVT backbones (Euclidean spatial decay attention with 1D token grouping) for
OpenMMLab 2.x. Importing it allow-lists OpenMMLab checkpoint classes for safe
``weights_only`` loading, makes mmengine's local checkpoint writes atomic, and registers
the modules into mmpretrain, mmdet and mmseg, caches the toolkits' config index for
``pkg::`` bases, and registers a FLOP handle for fused attention into
mmengine's and fvcore's counters."""
from .utils.atomic_io import enable_atomic_local_writes
from .utils.checkpoint import enable_safe_checkpoint_loading
from .utils.dist import enable_cpu_distributed

__version__ = '0.1.0'

enable_safe_checkpoint_loading()
enable_atomic_local_writes()  # no half-written checkpoints when a job is killed
enable_cpu_distributed()  # tools/dist_train.sh with gloo on machines without GPUs

from .models import EVT, RMTClsNeck, arch_zoo  # noqa: E402
from .registry import register_all_modules  # noqa: E402

REGISTERED_TOOLKITS = register_all_modules()

from .hub import (enable_config_index_cache, enable_config_prefix,  # noqa: E402
                  register_model_names)

enable_config_prefix()  # `_base_ = 'mmevt::...'` resolves (installed from a wheel)
enable_config_index_cache()  # `pkg::` bases: the toolkits' metafiles read once, not per base
MODEL_NAMES = register_model_names()  # mmpretrain.get_model('evt-t_8xb128_in1k') etc.

from .analysis.flop_handles import register_flop_handles  # noqa: E402

register_flop_handles()  # mmengine's / fvcore's FLOP counters count fused attention

__all__ = ['EVT', 'RMTClsNeck', 'arch_zoo', 'register_all_modules', '__version__']
