"""mmpretrain (image classification): what mmevt knows and does for it."""
from typing import Mapping, Optional

from .base import Toolkit


class MMPretrain(Toolkit):
    """mmpretrain. Classifiers are probed at ImageNet's 224: their backbones may not pad
    (mmpretrain's Swin needs its 7 x 7 windows at stride 32). Its smoke batch is the base
    class's (a label an image)."""
    scope = 'mmpretrain'
    package = 'mmpretrain'
    configs = 'cls'
    docs = 'classification'
    requirements = dict(upstream='requirements/upstream.txt', fork='requirements/fork.txt')
    demo_data = 'generate_shape_classes'
    probe_size = 224
    flops_shape = (224, 224)
    keeps_query_recipe = False
    schedule_why = ": warm-up + cosine over SRC's epochs"
    rgb_setting = ('to_rgb', True)  # mmpretrain's data preprocessor's key
    metrics = ('SubsetAccuracy', )  # an ImageNet-subset accuracy of classifiers
    zoo_counts_whole_model = True

    def recipe_family(self, model_cfg: Mapping) -> Optional[str]:
        return 'cls'


TOOLKIT = MMPretrain()
