from .complexity import count_macs, count_params, model_complexity

__all__ = ['count_macs', 'count_params', 'model_complexity']
