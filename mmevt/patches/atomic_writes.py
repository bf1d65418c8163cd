"""Atomic local file writes for mmengine, only where they keep the write's meaning.

mmengine 0.10.7 writes checkpoints with ``LocalBackend.put`` straight into the final file,
so a job killed mid-write leaves a truncated ``epoch_N.pth`` (and ``last_checkpoint``
pointing at it), and a failed write clobbers the previous file of that name. After
:func:`enable_atomic_local_writes`, ``put`` / ``put_text`` (checkpoints, ``mmengine.dump``,
log and result files) and the checkpoint hook's ``last_checkpoint`` write a new or regular
single-link file through a temporary file in the same directory and ``os.replace``:
readers see the old file or the complete new one, never a partial one.

Everything else is written as mmengine writes it, because replacing the file would change
what the write means: a symlink is written through to its target (the target is what is
replaced), a file with other hard links is written in place (replacing it would split the
links), a FIFO, device or other non-regular path in place. A replaced file keeps the mode
and, where the process may set it, the owner of the file it replaces; a new one gets what
``open()`` would give it (``0o666`` minus the umask).

Binary writes (checkpoints, pickles) are flushed to disk (``fsync``) before the rename:
otherwise a machine crash soon after can leave the new name pointing at data that never
reached the disk, with ``last_checkpoint`` naming it. Text writes are not: they are small,
frequent (logs, json dumps), and a killed process loses nothing the kernel already has.

Temporary files are named ``.NAME.mmevt-HOST-PID-XXXX.tmp``; one whose writer was killed
(its pid is gone on this host) is removed by the next atomic write in that directory.
"""
import builtins
import io
import os
import os.path as osp
import re
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

_HOST = re.sub(r'[^A-Za-z0-9_.]', '_', socket.gethostname()) or 'host'
_TEMPORARY = re.compile(r'^\..+\.mmevt-(?P<host>[^-]+)-(?P<pid>\d+)-[^.]+\.tmp$')


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it; put it back at once
    os.umask(mask)
    return mask


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


def remove_orphaned_temporaries(directory: str) -> int:
    """Remove mmevt's temporary files in ``directory`` whose writer (same host) is gone.

    Returns:
        int: how many were removed.
    """
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        match = _TEMPORARY.match(entry.name)
        if (match and match['host'] == _HOST and int(match['pid']) != os.getpid()
                and not _pid_alive(int(match['pid']))):
            try:
                os.remove(entry.path)
                removed += 1
            except OSError:  # another writer removed it first
                pass
    return removed


def _write_in_place(data: bytes, path: str) -> None:
    with builtins.open(path, 'wb') as f:
        f.write(data)


def atomic_write(data: Union[bytes, str], filepath: Union[str, Path], encoding: str = 'utf-8',
                 fsync: Optional[bool] = None) -> None:
    """Write ``data`` to ``filepath``: atomically where that keeps the write's meaning.

    Args:
        data (bytes | str): the contents; a str is encoded with ``encoding``.
        filepath (str | Path): where; missing directories are created (as mmengine does).
        encoding (str): for str data. Defaults to ``'utf-8'``.
        fsync (bool, optional): flush to disk before the rename. Defaults to True for bytes
            and False for str (the module docstring says why).
    """
    raw = data.encode(encoding) if isinstance(data, str) else data
    fsync = not isinstance(data, str) if fsync is None else fsync
    path = str(filepath)
    if osp.islink(path):  # the link stays, its target gets the data, as with open()
        path = osp.realpath(path)
    directory = osp.dirname(osp.abspath(path))
    os.makedirs(directory, exist_ok=True)
    try:
        old: Optional[os.stat_result] = os.stat(path)
    except FileNotFoundError:
        old = None
    if old is not None and (not stat.S_ISREG(old.st_mode) or old.st_nlink > 1):
        _write_in_place(raw, path)
        return
    remove_orphaned_temporaries(directory)
    fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(path)}.mmevt-{_HOST}-{os.getpid()}-',
                               suffix='.tmp', dir=directory)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(raw)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        if old is None:
            os.chmod(tmp, 0o666 & ~_umask())
        else:
            os.chmod(tmp, stat.S_IMODE(old.st_mode))
            try:
                os.chown(tmp, old.st_uid, old.st_gid)
            except PermissionError:  # only root may give a file away; the group may fail
                pass
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise


class _AtomicTextFile(io.StringIO):
    """A text file opened for writing whose contents land by :func:`atomic_write` on a clean
    close; an exception inside its ``with`` block writes nothing."""

    def __init__(self, path: str, encoding: str = 'utf-8'):
        super().__init__()
        self._path, self._encoding = path, encoding

    def close(self) -> None:
        if not self.closed:
            atomic_write(self.getvalue(), self._path, self._encoding)
        super().close()

    def __exit__(self, exc_type, *args: Any) -> None:
        if exc_type is not None:
            super().close()  # discard: the previous file stays
        else:
            self.close()


def open_last_checkpoint_atomically(file: Any, mode: str = 'r', *args: Any, **kwargs: Any):
    """The name ``open`` inside ``mmengine.hooks.checkpoint_hook``: ``builtins.open``, except
    that writing ``WORK_DIR/last_checkpoint`` (after each checkpoint is saved) is atomic."""
    if (mode == 'w' and not args and set(kwargs) <= {'encoding'}
            and osp.basename(os.fspath(file)) == 'last_checkpoint'):
        return _AtomicTextFile(os.fspath(file), kwargs.get('encoding') or 'utf-8')
    return builtins.open(file, mode, *args, **kwargs)


def enable_atomic_local_writes() -> None:
    """Make mmengine's ``LocalBackend.put`` / ``put_text`` and the checkpoint hook's
    ``last_checkpoint`` write atomic. Idempotent."""
    from mmengine.fileio.backends.local_backend import LocalBackend
    from mmengine.hooks import checkpoint_hook
    checkpoint_hook.open = open_last_checkpoint_atomically
    if getattr(LocalBackend, '_mmevt_atomic', False):
        return

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        atomic_write(obj, filepath)

    def put_text(self, obj: str, filepath: Union[str, Path], encoding: str = 'utf-8') -> None:
        atomic_write(obj, filepath, encoding)

    LocalBackend.put = put
    LocalBackend.put_text = put_text
    LocalBackend._mmevt_atomic = True
