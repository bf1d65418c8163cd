"""The photograph the pictures, the Grad-CAM test and the demos draw on, and fitting an image
to a model's input size.

Shared by ``tools/visualization/`` (attention maps, Grad-CAM), the ONNX / mmdeploy parity
checks and the tests; a helper for assets, not an analysis.
"""
import os.path as osp


def sample_photo_path() -> str:
    """A real photograph that every matplotlib install ships (Grace Hopper, 600 x 512).

    Returns:
        str: path of ``mpl-data/sample_data/grace_hopper.jpg``.

    Raises:
        FileNotFoundError: this matplotlib install lacks its sample data.
    """
    import matplotlib
    path = osp.join(matplotlib.get_data_path(), 'sample_data', 'grace_hopper.jpg')
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path} is missing from this matplotlib install; pass an '
                                'image path instead')
    return path


def fit_image(img, h: int, w: int):
    """Centre-crop a PIL image to the aspect ratio of ``(h, w)``, then resize to it.

    Args:
        img (PIL.Image.Image): any mode; converted to RGB.
        h (int): output height.
        w (int): output width.

    Returns:
        PIL.Image.Image: RGB, ``w`` x ``h`` pixels, not distorted.
    """
    from PIL import Image
    img = img.convert('RGB')
    iw, ih = img.size
    if iw * h > ih * w:  # too wide: crop the sides
        cw, ch = round(ih * w / h), ih
    else:
        cw, ch = iw, round(iw * h / w)
    left, top = (iw - cw) // 2, (ih - ch) // 2
    return img.crop((left, top, left + cw, top + ch)).resize((w, h), Image.BICUBIC)
