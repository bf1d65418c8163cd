"""Fixtures shared by the test modules (helpers live in ``helpers.py``)."""
import os

import pytest


def pytest_configure(config):
    """Write yapf's cache once, and under pytest-xdist (``make test`` runs ``-n 2``) share
    the cores among the workers: each worker's torch would otherwise start one thread per
    core, and the workers would oversubscribe the machine."""
    workers = os.environ.get('PYTEST_XDIST_WORKER_COUNT')
    if not hasattr(config, 'workerinput'):
        # before the workers start: yapf's grammar cache, which processes importing yapf
        # together on an empty cache can read half-written (google/yapf#1204); the launch
        # tests give their ranks an empty one of their own (test_cluster.cold_yapf_cache)
        import yapf  # noqa: F401
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
    """The test changes torch's process-wide allow-list; put it back afterwards (as it is
    after ``import mmevt``, which the test may be the first to do)."""
    import torch

    import mmevt  # noqa: F401
    before = torch.serialization.get_safe_globals()
    yield
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(before)


@pytest.fixture(scope='session')
def slurm_cluster():
    """A real Slurm on this host (``tests/slurm_cluster.py``): munged, slurmctld and two
    slurmd of its own, started once per test process, stopped by pid after the session.

    The cluster tests form the pytest-xdist group ``slurm`` (``make test`` runs
    ``--dist loadgroup``), so a run starts one cluster. Where Slurm is missing or this is not
    root, they skip saying why and how to run them; in CI (``CI`` set) that is a failure.
    """
    from slurm_cluster import SlurmCluster, missing_slurm
    reason = missing_slurm()
    if reason:
        if os.environ.get('CI'):
            pytest.fail(f'CI runs the cluster tests: {reason}')
        pytest.skip(reason)
    cluster = SlurmCluster(nodes=2).start()
    yield cluster
    killed = cluster.stop()
    assert not killed, f'job processes of the test cluster outlived the tests: {killed}'


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Keep ``--dist loadgroup`` grouping on pytest >= 9.2 (the ``slurm`` group above).

    pytest-xdist 3.8 tells its scheduler an item's ``xdist_group`` by appending ``@NAME`` to
    ``item._nodeid``, which pytest 9.2 no longer reads (its node ids are structured,
    ``item._id``): the groups are silently ignored (pytest-dev/pytest-xdist#1386, fix
    pending in #1388). On an xdist worker of a loadgroup run, this appends the suffix where
    xdist's did not take; once xdist's works, it finds the suffix there and does nothing.
    """
    if not getattr(config.option, 'loadgroup', False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get('name', 'default'))
                        for m in item.iter_markers('xdist_group')})
        suffix = '@' + '_'.join(names)
        if names and not item.nodeid.endswith(suffix) and hasattr(item, '_id'):
            from _pytest.nodeid import NodeId
            item._id = NodeId.parse(item.nodeid + suffix)
