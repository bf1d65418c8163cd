"""Fixtures shared by the test modules (helpers live in ``helpers.py``)."""
import os

import pytest


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs ``-n 2``), share the cores among the workers:
    each worker's torch would otherwise start one thread per core, and the workers would
    oversubscribe the machine."""
    workers = os.environ.get('PYTEST_XDIST_WORKER_COUNT')
    if workers:
        import torch
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


@pytest.fixture(scope='session')
def shapes_root(tmp_path_factory):
    """8 training + 4 validation images, COCO and ADE20K layouts (made once per session)."""
    from mmevt.datasets import generate_shapes
    root = str(tmp_path_factory.mktemp('shapes'))
    generate_shapes(root, num_train=8, num_val=4, img_size=(96, 128), seed=0)
    return root


@pytest.fixture(scope='session')
def zoo_counts():
    """``tools/analysis/complexity.py``'s rows for every arch of its tables at 224 x 224
    (one counted forward per arch on the meta device), shared by the docs-table and the
    complexity tests."""
    from helpers import load_tool
    complexity = load_tool('tools/analysis/complexity.py')
    return complexity.complexity_rows(complexity.ARCHS, (224, 224))


@pytest.fixture(autouse=True)
def _restore_default_scope():
    """Undo any global default scope a test leaves behind.

    The toolkits' own inferencers (e.g. mmdet's ``DetInferencer``) call
    ``init_default_scope`` for the whole process; a later test building mmpretrain
    transforms would then look them up in mmdet's registry. mmengine keeps the scopes in
    ``DefaultScope._instance_dict`` (the newest is current), so restoring it restores the
    scope the next test starts from.
    """
    from mmengine.registry import DefaultScope
    before = dict(DefaultScope._instance_dict)
    yield
    DefaultScope._instance_dict.clear()
    DefaultScope._instance_dict.update(before)


@pytest.fixture
def safe_globals_restored():
    """The test changes torch's process-wide allow-list; put it back afterwards."""
    import torch
    before = torch.serialization.get_safe_globals()
    yield
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(before)
