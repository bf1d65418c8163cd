"""mmengine's local writes after ``import mmevt``, seen from code that is not EVT's: atomic
where that keeps the write's meaning, written as before everywhere else."""
import errno
import os
import os.path as osp
import re
import signal
import stat
import subprocess
import sys
import threading

import pytest

from helpers import REPO, plain_mmengine_runner, tool_env


@pytest.fixture(autouse=True)
def _mmevt():
    import mmevt  # noqa: F401  (its patches are what is tested)


def _dump(obj, path):
    import mmengine
    mmengine.dump(obj, str(path))


def test_a_symlink_is_written_through_to_its_target(tmp_path):
    target, link = tmp_path / 'real.json', tmp_path / 'link.json'
    target.write_text('{}')
    link.symlink_to(target)
    _dump({'a': 1}, link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == '{"a": 1}'
    dangling = tmp_path / 'dangling.json'
    dangling.symlink_to(tmp_path / 'made.json')
    _dump({'b': 2}, dangling)  # as open() does: the target is created
    assert dangling.is_symlink() and (tmp_path / 'made.json').read_text() == '{"b": 2}'


def test_a_hard_linked_file_stays_linked(tmp_path):
    first, second = tmp_path / 'first.json', tmp_path / 'second.json'
    first.write_text('{}')
    os.link(first, second)
    _dump({'a': 1}, first)
    assert os.path.samefile(first, second) and second.read_text() == '{"a": 1}'


def test_an_existing_files_mode_and_owner_are_kept(tmp_path):
    path = tmp_path / 'secret.json'
    path.write_text('{}')
    os.chmod(path, 0o600)
    owner = (4242, 4243) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    if os.geteuid() == 0:
        os.chown(path, *owner)
    _dump({'a': 1}, path)
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and (st.st_uid, st.st_gid) == owner
    assert path.read_text() == '{"a": 1}'


def test_a_fifo_is_written_in_place(tmp_path):
    from mmengine.fileio import put_text
    fifo = tmp_path / 'pipe'
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)
    reader.start()
    put_text('through the pipe', str(fifo))
    reader.join(timeout=60)
    assert got == ['through the pipe'] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_only_checkpoint_sized_writes_are_flushed_to_disk(tmp_path, monkeypatch):
    from mmengine.fileio import put, put_text

    from mmevt.patches.atomic_writes import FSYNC_BYTES
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, 'fsync', lambda fd: (synced.append(fd), real_fsync(fd)))
    put_text('small text', str(tmp_path / 'log.json'))
    put(b'a small image', str(tmp_path / 'vis.jpg'))
    assert synced == []
    put(b'c' * FSYNC_BYTES, str(tmp_path / 'epoch_1.pth'))
    assert len(synced) == 1


@pytest.mark.parametrize('fails, error', [('mkstemp', errno.EACCES), ('replace', errno.EBUSY)],
                         ids=['read-only directory', 'bind-mounted file'])
def test_where_no_temporary_can_be_used_the_file_is_written_in_place(tmp_path, monkeypatch,
                                                                     fails, error):
    # the kernel's answers in a read-only directory holding a writable file, and for a file
    # bind-mounted into a container (root may write anywhere, so they are given here)
    import tempfile
    path = tmp_path / 'results.json'
    path.write_text('{}')

    def refused(*args, **kwargs):
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(*((tempfile, 'mkstemp') if fails == 'mkstemp' else (os, 'replace')),
                        refused)
    _dump({'a': 1}, path)  # as open() does
    assert path.read_text() == '{"a": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['results.json']  # no temporary


def test_a_file_the_process_may_not_write_stays_refused(tmp_path):
    path = tmp_path / 'read-only.json'
    path.write_text('{}')
    os.chmod(path, 0o444)
    writable = os.access(path, os.W_OK)  # root may write it, with open() as with mmevt
    try:
        _dump({'a': 1}, path)
    except PermissionError:
        assert not writable and path.read_text() == '{}'
    else:
        assert writable and path.read_text() == '{"a": 1}'


KILLED_WRITER = '''
import os, signal, sys
import torch
import mmevt
from mmengine.runner.checkpoint import save_checkpoint
real_replace = os.replace
def killed(src, dst):  # the job is killed after writing, before the rename
    print(src, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
os.replace = killed
save_checkpoint({'state_dict': {'w': torch.zeros(100000)}}, sys.argv[1])
'''


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    from mmengine.runner.checkpoint import save_checkpoint
    import torch
    path = tmp_path / 'epoch_1.pth'
    save_checkpoint({'state_dict': {'w': torch.ones(3)}}, str(path))
    good = path.read_bytes()
    proc = subprocess.run([sys.executable, '-c', KILLED_WRITER, str(path)], cwd=REPO,
                          env=tool_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    temporary = proc.stdout.strip().splitlines()[-1]
    host, pid = re.match(r'\.epoch_1\.pth\.mmevt-([^-]+)-(\d+)-[^.]+\.tmp$',
                         osp.basename(temporary)).groups()
    assert osp.getsize(temporary) > 400000  # a full-size file, left by the killed job
    assert path.read_bytes() == good  # the old checkpoint is intact
    # a temporary of a writer still running (this test's parent) is left alone
    alive = tmp_path / f'.other.pth.mmevt-{host}-{os.getppid()}-x.tmp'
    alive.write_bytes(b'in progress')
    save_checkpoint({'state_dict': {'w': torch.ones(4)}}, str(tmp_path / 'epoch_2.pth'))
    assert not osp.exists(temporary) and alive.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [alive.name, 'epoch_1.pth', 'epoch_2.pth'])


def test_last_checkpoint_is_written_atomically_after_its_checkpoint(tmp_path, monkeypatch):
    from mmengine.hooks import checkpoint_hook
    from mmevt.patches.atomic_writes import open_last_checkpoint_atomically
    assert checkpoint_hook.open is open_last_checkpoint_atomically
    plain_mmengine_runner(tmp_path / 'run', max_iters=2, interval=2).train()
    last = tmp_path / 'run' / 'last_checkpoint'
    assert last.read_text() == str(tmp_path / 'run' / 'iter_2.pth')
    real_replace = os.replace

    def dies_at_last_checkpoint(src, dst):
        if osp.basename(dst) == 'last_checkpoint':
            raise KeyboardInterrupt  # the job is killed before the rename
        real_replace(src, dst)

    monkeypatch.setattr(os, 'replace', dies_at_last_checkpoint)
    runner = plain_mmengine_runner(tmp_path / 'run', max_iters=4, interval=2,
                                   load_from=str(tmp_path / 'run' / 'iter_2.pth'), resume=True)
    with pytest.raises(KeyboardInterrupt):
        runner.train()
    assert (tmp_path / 'run' / 'iter_4.pth').is_file()  # saved before last_checkpoint
    assert last.read_text() == str(tmp_path / 'run' / 'iter_2.pth')  # old one, whole
    assert not [p for p in (tmp_path / 'run').iterdir() if p.name.endswith('.tmp')]
    # other files the hook module opens are opened as before
    with checkpoint_hook.open(tmp_path / 'other.txt', 'w') as f:
        f.write('x')
    assert type(f).__module__ == '_io'
