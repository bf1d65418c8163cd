"""The ecosystem's ``mim`` on the wheel a user installs: ``mim search mmevt`` reads the wheel's
``mmevt/.mim/model-index.yml``, ``mim train`` / ``mim test`` find a config there and run the
wheel's ``.mim/tools``, ``mim run mmevt get_flops`` runs ``.mim/tools/analysis/get_flops.py``.

Upstream's ``mim`` (openmim 0.3.9) imports ``pkg_resources`` at start, which setuptools >= 82
no longer has: the test checks that it fails without it and that the remedy
docs/get_started.md gives (a setuptools < 82 beside it) makes every command work. mim, its
readers and the wheel go into directories of their own (``pip --target``) on ``PYTHONPATH``,
so this venv is left as it is. On the fork, ``onedl-mim`` 0.5.1 does not find the wheel's
``.mim``: the test checks how it fails (docs/own_environment.md)."""
import os
import os.path as osp
import shutil
import subprocess
import sys

import pytest
import yaml

from helpers import (COPY_SKIP, HANG_TIMEOUT, REPO, SEG_USER_CONFIG,
                     _setuptools_with_pkg_resources, current_stack, tool_env)



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


def _wheel_installed(tmp_path, env) -> str:
    """mmevt's wheel built from a copy of the sources and installed into a directory."""
    src, site = tmp_path / 'src', tmp_path / 'site'
    shutil.copytree(REPO, src, ignore=COPY_SKIP)
    _run([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--no-build-isolation',
          '--no-index', '--target', str(site), str(src)], tmp_path, env)
    assert osp.isfile(site / 'mmevt' / '.mim' / 'model-index.yml')
    return str(site)


def _listed(out: str) -> set:
    return {ln.split(': ', 1)[1].strip() for ln in out.splitlines()
            if ln.startswith('config id:')}


@pytest.mark.e2e
def test_mim_lists_trains_tests_and_runs_tools_of_the_wheel(tmp_path, shapes_root):
    user = tmp_path / 'user'
    user.mkdir()
    env = tool_env(PIP_DISABLE_PIP_VERSION_CHECK='1')
    env.pop('PYTHONPATH', None)
    site = _wheel_installed(tmp_path, env)
    mim = str(tmp_path / 'mim')
    cmd = [sys.executable, '-W', 'ignore', '-m', 'mim']
    pip = [sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--target', mim]
    if current_stack() == 'fork':
        # onedl-mim needs no pkg_resources, but takes a package's directory from the first
        # file of its record: for mmevt's wheel a console script, ../bin/mmevt-deploy
        _run(pip + ['onedl-mim==0.5.1', 'model-index', 'pandas==2.2.3', 'colorama', 'pytz'],
             user, env)
        env['PYTHONPATH'] = os.pathsep.join([site, mim])
        out = _run(cmd + ['search', 'mmevt'], user, env, check=False)
        assert out.returncode != 0, out.stdout[-3000:]
        assert f'{site}/../model-index.yml' in out.stdout, out.stdout[-3000:]
        return
    # the remedy of docs/troubleshooting.md: openmim and what it imports beyond this venv
    # (its dataset downloaders pin setuptools 60 and are not needed), no dependencies
    _run(pip + ['openmim==0.3.9', 'model-index', 'pandas', 'colorama'], user, env)
    env['PYTHONPATH'] = os.pathsep.join([site, mim])
    out = _run(cmd + ['--help'], user, env, check=False)
    assert out.returncode != 0 and "No module named 'pkg_resources'" in out.stdout, out.stdout
    # ... and a setuptools < 82 beside it
    env['PYTHONPATH'] += os.pathsep + _setuptools_with_pkg_resources()
    ids = _config_ids()
    assert _listed(_run(cmd + ['search', 'mmevt', '--field', 'config'], user, env).stdout) == ids
    coco = _listed(_run(cmd + ['search', 'mmevt', '--dataset', 'coco', '--field', 'config'],
                        user, env).stdout)
    assert coco and coco < ids and all('coco' in i for i in coco), coco

    (user / 'seg.py').write_text(SEG_USER_CONFIG.format(root=shapes_root + '/'))
    log = _run(cmd + ['train', 'mmevt', 'seg.py', '--work-dir', 'work'], user, env).stdout
    assert 'Iter(train) [2/2]' in log, log[-3000:]
    assert osp.join(site, 'mmevt', '.mim', 'tools', 'train.py') in log
    log = _run(cmd + ['test', 'mmevt', 'seg.py', '--checkpoint', 'work/iter_2.pth',
                      '--work-dir', 'work'], user, env).stdout
    assert 'mIoU' in log, log[-3000:]
    # a tool by name: mim finds it under the wheel's .mim/tools
    flops = _run(cmd + ['run', 'mmevt', 'get_flops', osp.join(
        site, 'mmevt', '.mim', 'configs', 'cls', 'evt', 'evt-t_8xb128_in1k.py')],
        user, env).stdout
    assert 'get_flops.py' in flops and 'FLOPs' in flops, flops[-3000:]
