"""The ecosystem's ``mim`` on the wheel a user installs: ``mim search mmevt`` reads the wheel's
``mmevt/.mim/model-index.yml``, ``mim train`` / ``mim test`` find a config there and run the
wheel's ``.mim/tools``, ``mim run mmevt get_flops`` runs ``.mim/tools/analysis/get_flops.py``.

Upstream's ``mim`` (openmim 0.3.9) imports ``pkg_resources`` at start, which setuptools >= 82
no longer has: the test checks that it fails without it and that the remedy
docs/get_started.md gives (a setuptools < 82 beside it) makes every command work. mim, its
readers and the wheel go into directories of their own (``pip --target``) on ``PYTHONPATH``,
so this venv is left as it is. One e2e test on the upstream stack (the fork's ``onedl-mim``
is not tested yet)."""
import os
import os.path as osp
import shutil
import subprocess
import sys

import pytest
import yaml

from helpers import (COPY_SKIP, HANG_TIMEOUT, REPO, _setuptools_with_pkg_resources,
                     current_stack, tool_env)

SEG_USER_CONFIG = '''_base_ = 'mmevt::demo/fpn_evt-demo_shapes.py'
data_root = {root!r}
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root))
val_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=2, val_interval=2)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))
'''


def _run(cmd, cwd, env, check=True):
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=HANG_TIMEOUT)
    if check:
        assert proc.returncode == 0, f'{cmd} exited {proc.returncode}:\n{proc.stdout[-6000:]}'
    return proc


def _config_ids() -> set:
    ids = set()
    for meta in yaml.safe_load(open(osp.join(REPO, 'model-index.yml')))['Import']:
        ids |= {m['Name'] for m in yaml.safe_load(open(osp.join(REPO, meta)))['Models']}
    return ids


def test_the_tools_answer_help_without_a_config(capsys):
    # mim train / test read `tools/train.py -h` before they run it
    from mmevt.apis.launch import run_toolkit_tool
    run_toolkit_tool('train', ['-h'])
    assert capsys.readouterr().out.startswith('usage: tools/train.py CONFIG [options]')
    with pytest.raises(ValueError, match='no config file given'):
        run_toolkit_tool('test', ['--amp'])


@pytest.mark.e2e
@pytest.mark.skipif(current_stack() != 'upstream', reason='openmim is upstream\'s mim')
def test_openmim_lists_trains_tests_and_runs_tools_of_the_wheel(tmp_path, shapes_root):
    src, site, mim, user = (tmp_path / n for n in ('src', 'site', 'mim', 'user'))
    shutil.copytree(REPO, src, ignore=COPY_SKIP)
    user.mkdir()
    env = tool_env(PIP_DISABLE_PIP_VERSION_CHECK='1')
    env.pop('PYTHONPATH', None)
    pip = [sys.executable, '-m', 'pip', 'install', '-q', '--no-deps']
    _run(pip + ['--no-build-isolation', '--no-index', '--target', str(site), str(src)],
         user, env)
    assert osp.isfile(site / 'mmevt' / '.mim' / 'model-index.yml')
    # openmim and what its commands import beyond this venv (its other dependencies, the
    # dataset downloaders, pin setuptools 60 and are not needed here)
    _run(pip + ['--target', str(mim), 'openmim==0.3.9', 'model-index', 'pandas', 'colorama'],
         user, env)
    cmd = [sys.executable, '-W', 'ignore', '-m', 'mim']

    env['PYTHONPATH'] = os.pathsep.join([str(site), str(mim)])
    out = _run(cmd + ['--help'], user, env, check=False)
    assert out.returncode != 0 and "No module named 'pkg_resources'" in out.stdout, out.stdout

    # the remedy: a setuptools < 82 beside it
    env['PYTHONPATH'] += os.pathsep + _setuptools_with_pkg_resources()
    listed = _run(cmd + ['search', 'mmevt', '--field', 'config'], user, env).stdout
    ids = _config_ids()
    assert {ln.split(': ', 1)[1].strip() for ln in listed.splitlines()
            if ln.startswith('config id:')} == ids
    coco = _run(cmd + ['search', 'mmevt', '--dataset', 'coco', '--field', 'config'],
                user, env).stdout
    coco_ids = {ln.split(': ', 1)[1].strip() for ln in coco.splitlines()
                if ln.startswith('config id:')}
    assert coco_ids and coco_ids < ids and all('coco' in i for i in coco_ids), coco_ids

    (user / 'seg.py').write_text(SEG_USER_CONFIG.format(root=shapes_root + '/'))
    log = _run(cmd + ['train', 'mmevt', 'seg.py', '--work-dir', 'work'], user, env).stdout
    assert 'Iter(train) [2/2]' in log, log[-3000:]
    assert str(site / 'mmevt' / '.mim' / 'tools' / 'train.py') in log
    log = _run(cmd + ['test', 'mmevt', 'seg.py', '--checkpoint', 'work/iter_2.pth',
                      '--work-dir', 'work'], user, env).stdout
    assert 'mIoU' in log, log[-3000:]
    # a tool by name: mim finds it under the wheel's .mim/tools
    flops = _run(cmd + ['run', 'mmevt', 'get_flops', str(
        site / 'mmevt' / '.mim' / 'configs' / 'cls' / 'evt' / 'evt-t_8xb128_in1k.py')],
        user, env).stdout
    assert 'get_flops.py' in flops and 'FLOPs' in flops, flops[-3000:]
