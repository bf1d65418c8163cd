"""timm's own ``tests/test_models.py`` run on mmevt's timm models.

The file comes from timm's sdist (the wheel has no tests), which ``tools/bootstrap.sh``
downloads pinned by its hash (``requirements/timm-suite.txt``); it is extracted unchanged
into a temporary directory and run by pytest in a subprocess with our plugin
(``tests/timm_suite/plugin.py``: ``import mmevt.timm`` before collection, our names kept,
the tests that do not apply listed with the reason) and timm's module-filtered tests
called on our models (``tests/timm_suite/evt_checks.py``). ``docs/timm.md`` lists them.
"""
import hashlib
import os
import os.path as osp
import re
import tarfile

import pytest
from helpers import REPO, bootstrap_wheel, run_tool

SUITE = osp.join(REPO, 'tests', 'timm_suite')
NAMES = ('evt_tiny', 'evt_swin_tiny', 'rmt_tiny')
# timm's tests parametrized with our names that run, and its module-filtered ones we call
RUN = ('test_model_forward', 'test_model_backward', 'test_model_default_cfgs',
       'test_model_forward_features', 'test_model_forward_fx', 'test_model_backward_fx')
CALLED = ('test_model_forward_intermediates_features', 'test_model_forward_intermediates',
          'test_prune_intermediate_layers_contract')
NOT_APPLICABLE = ('test_model_forward_torchscript', 'test_model_forward_fx_torchscript')


def _pinned_sdist() -> str:
    """The sdist the bootstrap downloaded, checked against the pin's version and hash."""
    import timm
    with open(osp.join(REPO, 'requirements', 'timm-suite.txt')) as f:
        version, digest = re.search(r'^timm==(\S+) --hash=sha256:(\w+)', f.read(), re.M).groups()
    assert version == timm.__version__, 'requirements/timm-suite.txt pins another timm'
    path = bootstrap_wheel(f'timm-{version}.tar.gz')
    with open(path, 'rb') as f:
        assert hashlib.sha256(f.read()).hexdigest() == digest, f'{path}: not the pinned file'
    return path


@pytest.mark.e2e
def test_timm_test_models_pass_on_our_models(tmp_path):
    with tarfile.open(_pinned_sdist()) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith('/tests/test_models.py'))
        with open(tmp_path / 'test_models.py', 'wb') as f:
            f.write(tar.extractfile(member).read())
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')  # not our pyproject's options
    path = os.pathsep.join([SUITE, str(tmp_path), REPO, os.environ.get('PYTHONPATH', '')])
    proc = run_tool('-m', 'pytest', '-c', str(tmp_path / 'pytest.ini'), '-p', 'plugin',
                    '-p', 'no:cacheprovider', '-p', 'no:warnings', '-rA', '-q',
                    str(tmp_path / 'test_models.py'), osp.join(SUITE, 'evt_checks.py'),
                    env=dict(PYTHONPATH=path, MMEVT_TIMM_SUITE_NAMES=','.join(NAMES)),
                    check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-8000:]
    passed = set(re.findall(r'^PASSED \S+::(\w+)\[(?:\d+-)?(\w+)\]', out, re.M))
    assert passed == {(t, n) for t in RUN + CALLED for n in NAMES}, out[-8000:]
    left_out = set(re.findall(r'^NOT APPLICABLE \S+::(\w+)\[\d+-(\w+)\]: ', out, re.M))
    assert left_out == {(t, n) for t in NOT_APPLICABLE for n in NAMES}
    assert re.search(rf'{len(passed)} passed, \d+ deselected', out), out[-2000:]
