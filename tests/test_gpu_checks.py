"""The prepared GPU session's scripts stay runnable between GPU sessions: a device is lent
only to some sessions, with minutes of device time, so a script that breaks on the CPU side
would waste the draw."""
import os.path as osp
import re

from helpers import REPO, load_tool


def test_gpu_checks_quick_on_the_cpu(capsys):
    tool = load_tool('tools/analysis/gpu_checks.py')
    results = tool.check_paths(__import__('torch').device('cpu'), quick=True)
    # every layout, every precision, each fast path that has a CPU backward (SDPA here)
    assert {r['mode'] for r in results} == set(tool.LAYOUTS)
    assert {r['precision'] for r in results} == set(tool.PRECISIONS)
    assert {r['impl'] for r in results} >= {'sdpa'}
    bad = [r for r in results if not r['ok']]
    assert not bad, bad


def test_gpu_session_fits_its_budget():
    # the budget: one run of the session in about 420 s, leaving room for a rerun
    text = open(osp.join(REPO, 'tools', 'analysis', 'gpu_session.sh')).read()
    limits = [int(x) for x in re.findall(r'^step (\d+) ', text, flags=re.M)]
    assert len(limits) >= 6 and sum(limits) <= 420, limits
    for script in re.findall(r'(tools/analysis/\w+\.py)', text):
        assert osp.isfile(osp.join(REPO, script)), script
