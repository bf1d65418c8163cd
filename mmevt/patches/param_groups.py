"""Optimizer parameter groups as plain dicts, so that ``compile=True`` can trace the step.

mmengine's ``DefaultOptimWrapperConstructor.__call__`` (the same code in onedl-mmengine
0.10.12) puts the groups that ``paramwise_cfg`` builds into the optimizer's config and builds
the optimizer through the registry; the config turns every group dict into a ``ConfigDict``,
and the optimizer keeps those objects as its ``param_groups``. mmengine's ``compile`` switch
compiles the model's ``train_step``, optimizer step included, and torch 2.14's Dynamo cannot
trace a step over dict subclasses: ``torch/optim/adam.py`` fails with
``'UserDefinedDictVariable' object has no attribute 'items'``. Every config with a
``paramwise_cfg`` or a layer-decay constructor fails so (mmdet's and mmpretrain's Swin
recipes as well as ours), whatever the model.

:func:`enable_plain_param_groups` makes the constructor's optimizer hold plain ``dict``
copies of its groups: same keys, same values, the same parameter lists. It runs when the
constructor returns, before anything (schedulers, checkpoint resume) holds a group.
"""
from typing import Any


def plain_param_groups(optimizer: Any) -> None:
    """Replace each ``dict`` subclass in ``optimizer.param_groups`` by a plain ``dict`` with
    the same items (the group's parameter list is the same object). In place."""
    groups = optimizer.param_groups
    for i, group in enumerate(groups):
        if type(group) is not dict:
            groups[i] = dict(group.items())


def enable_plain_param_groups() -> None:
    """Patch ``DefaultOptimWrapperConstructor.__call__`` (subclasses that do not override it
    included: mmdet's, mmseg's, mmpretrain's and mmevt's layer-decay constructors).
    Idempotent."""
    from mmengine.optim import DefaultOptimWrapperConstructor

    call = DefaultOptimWrapperConstructor.__call__
    if getattr(call, '_mmevt_plain_groups', False):
        return

    def __call__(self, model):
        optim_wrapper = call(self, model)
        plain_param_groups(optim_wrapper.optimizer)
        return optim_wrapper

    __call__._mmevt_plain_groups = True
    __call__._mmevt_original = call
    __call__.__doc__ = call.__doc__
    DefaultOptimWrapperConstructor.__call__ = __call__
