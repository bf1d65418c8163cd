"""Fixtures shared by the test modules (helpers live in ``helpers.py``)."""
import pytest


@pytest.fixture(scope='session')
def shapes_root(tmp_path_factory):
    """8 training + 4 validation images, COCO and ADE20K layouts (made once per session)."""
    from mmevt.datasets import generate_shapes
    root = str(tmp_path_factory.mktemp('shapes'))
    generate_shapes(root, num_train=8, num_val=4, img_size=(96, 128), seed=0)
    return root
