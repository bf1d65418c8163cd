"""mmseg (semantic segmentation): what mmevt knows and does for it."""
from typing import Mapping

from .base import Toolkit, random_images


class MMSeg(Toolkit):
    """mmseg. ADE20K's UperNet / Semantic FPN 2048 x 512 is the FLOP shape Swin and RMT
    quote."""
    scope = 'mmseg'
    package = 'mmsegmentation'
    configs = 'seg'
    docs = 'segmentation'
    requirements = dict(upstream='requirements/upstream.txt', fork='requirements/fork.txt')
    demo_data = 'generate_shapes'
    probe_size = 128
    flops_shape = (512, 2048)
    schedule_why = (": SRC's SGD schedule does not fit AdamW (e.g. mmseg's poly decays to "
                    '1e-4, above our lr)')
    schedule_ends_at_max_iters = True
    pads_to_input_size = True
    deploy_task = 'Segmentation'
    onnx_kind = 'segmentor'

    def make_batch(self, cfg, model_cfg: Mapping, size: int, batch: int,
                   classes: int) -> dict:
        """Images with a random semantic map each (``SegDataSample.gt_sem_seg``)."""
        import torch
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample
        gen = torch.Generator().manual_seed(0)
        inputs = random_images(size, batch, gen)
        samples = []
        for _ in range(batch):
            s = SegDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size),
                                            pad_shape=(size, size)))
            s.gt_sem_seg = PixelData(data=torch.randint(0, classes, (1, size, size),
                                                        generator=gen))
            samples.append(s)
        return dict(inputs=inputs, data_samples=samples)


TOOLKIT = MMSeg()
