"""Layer-wise learning-rate decay for any model whose backbone has ``get_layer_depth``.

mmpretrain's ``LearningRateDecayOptimWrapperConstructor`` asks the top model for
``get_layer_depth``, which detectors and segmentors do not have, and mmdet's / mmseg's
``LearningRateDecayOptimizerConstructor`` pick their rules by backbone class name (ConvNeXt,
BEiT, MAE) and parse parameter names that EVT does not have. This constructor asks the
*backbone* (``EVT.get_layer_depth``: stem 0, one id per block, downsampling with the first
block of its stage) and leaves every other rule to mmengine's
``DefaultOptimWrapperConstructor``, so ``custom_keys``, ``norm_decay_mult`` and the other
``paramwise_cfg`` options keep their meaning.
"""
import logging
import warnings
from collections import Counter
from functools import partial
from numbers import Real
from typing import Callable, List, Optional, Tuple, Union

from mmengine.logging import print_log
from mmengine.optim import DefaultOptimWrapperConstructor
from torch import nn


class EVTLayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """``DefaultOptimWrapperConstructor`` plus depth-wise lr decay of the backbone.

    A parameter at depth ``i`` of ``n`` (from the backbone's
    ``get_layer_depth(name, prefix='backbone.')``) trains at
    ``lr * layer_decay_rate ** (n - 1 - i)``: the last id (EVT's output norms) and
    everything outside the backbone (neck, heads) at ``lr``, EVT's last block at
    ``lr * rate``, the stem (id 0) at the smallest lr (the convention of mmpretrain's
    constructor and of the ConvNeXt / BEiT recipes). The decay
    multiplies whatever lr the default rules give (e.g. a ``custom_keys`` ``lr_mult``);
    weight decay is left to them.

    Use it in an mmdet / mmseg / mmpretrain config (mmengine's registry is the parent of
    theirs)::

        optim_wrapper = dict(
            constructor='EVTLayerDecayOptimWrapperConstructor',
            optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05),
            paramwise_cfg=dict(layer_decay_rate=0.9,
                               custom_keys={'norm': dict(decay_mult=0.)}))

    Args:
        optim_wrapper_cfg (dict): the ``optim_wrapper`` config (``optimizer`` with ``lr``).
        paramwise_cfg (dict, optional): mmengine's ``paramwise_cfg`` with
            ``layer_decay_rate`` (a float in (0, 1]; 1 gives no decay), which is required:
            the default None is an error.

    Raises:
        ValueError: ``layer_decay_rate`` is missing or outside (0, 1], the optimizer has no
            ``lr``, or the model's backbone has no ``get_layer_depth``.
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: Optional[dict] = None):
        rate = (paramwise_cfg or {}).get('layer_decay_rate')
        if isinstance(rate, bool) or not isinstance(rate, Real) or not 0 < rate <= 1:
            raise ValueError(
                'EVTLayerDecayOptimWrapperConstructor needs paramwise_cfg.layer_decay_rate, a '
                f'number in (0, 1] (e.g. 0.9; 1 means no decay), got {rate!r}')
        super().__init__(optim_wrapper_cfg, paramwise_cfg)
        if self.base_lr is None:
            raise ValueError('EVTLayerDecayOptimWrapperConstructor needs optimizer.lr, got '
                             f'optimizer={self.optimizer_cfg!r}')
        self.layer_decay_rate = float(rate)

    def add_params(self, params: List[dict], module: nn.Module, prefix: str = '',
                   is_dcn_module: Optional[Union[int, float]] = None) -> None:
        """mmengine's rules for every parameter, then (at the top call, ``prefix == ''``)
        the depth-wise lr scale. Each group gets ``layer_id`` and ``param_name`` too."""
        first = len(params)
        super().add_params(params, module, prefix, is_dcn_module)
        if prefix:  # a recursive call of mmengine's for a child module
            return
        depth_of = self._layer_depth_fn(module)
        names = {id(p): n for n, p in module.named_parameters()}
        tensors: Counter = Counter()
        for group in params[first:]:
            param, = group['params']  # mmengine makes one group per parameter
            name = names[id(param)]
            layer_id, num_layers = depth_of(name)
            group['lr'] = group.get('lr', self.base_lr) * self._scale(layer_id, num_layers)
            group.update(layer_id=layer_id, param_name=name)
            tensors[(layer_id, num_layers)] += 1
        print_log(f'layer-wise lr decay {self.layer_decay_rate}: ' + ', '.join(
            f'layer {i}: x{self._scale(i, n):.3g} ({k} tensors)'
            for (i, n), k in sorted(tensors.items())), logger='current', level=logging.INFO)

    def _scale(self, layer_id: int, num_layers: int) -> float:
        return self.layer_decay_rate**(num_layers - 1 - layer_id)

    @staticmethod
    def _layer_depth_fn(model: nn.Module) -> Callable[[str], Tuple[int, int]]:
        """``name -> (layer_id, num_layers)`` from ``model.backbone`` (or the model itself,
        e.g. a bare backbone)."""
        backbone = getattr(model, 'backbone', None)
        if hasattr(backbone, 'get_layer_depth'):
            return partial(backbone.get_layer_depth, prefix='backbone.')
        if hasattr(model, 'get_layer_depth'):
            return model.get_layer_depth
        owner = type(model).__name__
        if backbone is not None:
            owner += f' (backbone {type(backbone).__name__})'
        raise ValueError('EVTLayerDecayOptimWrapperConstructor needs a backbone with '
                         f'get_layer_depth(name, prefix), e.g. EVT; {owner} has none')


class RenamedLayerDecayOptimWrapperConstructor(EVTLayerDecayOptimWrapperConstructor):
    """``LayerDecayOptimWrapperConstructor``, the name of
    :class:`EVTLayerDecayOptimWrapperConstructor` before 0.2.0: it works, and warns.

    Registered under the old name only while no other package has it (mmpose 1.3.2 registers
    its own, with ``force=True``, which then replaces this one for mmpose's configs, as before
    the rename)."""

    def __init__(self, *args, **kwargs):
        warnings.warn("optim_wrapper.constructor='LayerDecayOptimWrapperConstructor' is "
                      "mmevt's old name: write 'EVTLayerDecayOptimWrapperConstructor' (mmpose "
                      'registers a different class of the old name)', FutureWarning)
        super().__init__(*args, **kwargs)
