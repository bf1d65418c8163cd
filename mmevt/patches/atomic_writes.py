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

Where the temporary file cannot be made or renamed although the file itself could be written
(a read-only directory, a bind-mounted file), the write happens in place, as before; a file
the process may not write stays refused, as with ``open()``.

Writes of :data:`FSYNC_BYTES` or more (checkpoints) are flushed to disk (``fsync``) before
the rename: otherwise a machine crash soon after can leave the new name pointing at data that
never reached the disk, with ``last_checkpoint`` naming it. Smaller ones (logs, json dumps,
images) are not: they are frequent, and a killed process loses nothing the kernel already has.

Temporary files are named ``.NAME.mmevt-HOST-PID-XXXX.tmp`` and locked (``flock``) while
written; one whose writer is gone (its pid is not running on this host, and nobody holds its
lock: the lock also guards writers in other pid namespaces) is removed by the next atomic
write in that directory (looked for only when someone else changed the directory since
this process's last write there, so many writes into one directory stay cheap).
"""
import builtins
import errno
import fcntl
import io
import os
import os.path as osp
import re
import socket
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Optional, Union

FSYNC_BYTES = 1 << 20  # 1 MiB: checkpoints, not logs or images
_HOST = re.sub(r'[^A-Za-z0-9_.]', '_', socket.gethostname())[:64] or 'host'
_TEMPORARY = re.compile(r'^\..*\.mmevt-(?P<host>[^-]+)-(?P<pid>\d+)-[^.]+\.tmp$')
_CLEANED: Dict[str, int] = {}  # directory -> its mtime after this process's last write
# a temporary cannot be made or renamed there, but the file may be written in place
_IN_PLACE_ERRORS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.EBUSY, errno.EXDEV,
                    errno.ENAMETOOLONG)


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


def _locked(path: str) -> bool:
    """Whether a writer holds the lock of temporary ``path`` (it is being written)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def remove_orphaned_temporaries(directory: str) -> int:
    """Remove mmevt's temporary files in ``directory`` whose writer is gone: its pid not
    running on this host and its lock free.

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
                and not _pid_alive(int(match['pid'])) and not _locked(entry.path)):
            try:
                os.remove(entry.path)
                removed += 1
            except OSError:  # another writer removed it first
                pass
    return removed


def _directory_version(directory: str) -> int:
    try:
        return os.stat(directory).st_mtime_ns
    except OSError:
        return -1


def _clean_if_touched(directory: str) -> None:
    """Look for orphaned temporaries unless nobody but this process changed the directory
    since its last atomic write there (its own renames keep the directory's mtime, which
    is recorded after each): many writes into one directory stay O(1) each."""
    if _CLEANED.get(directory) != _directory_version(directory):
        remove_orphaned_temporaries(directory)


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
        fsync (bool, optional): flush to disk before the rename. Defaults to True for
            :data:`FSYNC_BYTES` or more (the module docstring says why).
    """
    raw = data.encode(encoding) if isinstance(data, str) else data
    fsync = len(raw) >= FSYNC_BYTES if fsync is None else fsync
    path = str(filepath)
    if osp.islink(path):  # the link stays, its target gets the data, as with open()
        path = osp.realpath(path)
    directory = osp.dirname(osp.abspath(path))
    os.makedirs(directory, exist_ok=True)
    try:
        old: Optional[os.stat_result] = os.stat(path)
    except FileNotFoundError:
        old = None
    if old is not None and (not stat.S_ISREG(old.st_mode) or old.st_nlink > 1
                            or not os.access(path, os.W_OK)):
        _write_in_place(raw, path)  # as mmengine writes it (a read-only file: refused)
        return
    _clean_if_touched(directory)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f'.{osp.basename(path)[:150]}.mmevt-{_HOST}-{os.getpid()}-', suffix='.tmp',
            dir=directory)
    except OSError as err:
        if err.errno not in _IN_PLACE_ERRORS:
            raise
        _write_in_place(raw, path)
        return
    try:
        with os.fdopen(fd, 'wb') as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # held until renamed (closed)
            f.write(raw)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
            if old is None:
                os.fchmod(f.fileno(), 0o666 & ~_umask())
            else:
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
                if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                    try:
                        os.fchown(f.fileno(), old.st_uid, old.st_gid)
                    except OSError:  # only root may give a file away; user namespaces
                        pass
            try:
                os.replace(tmp, path)
            except OSError as err:
                if err.errno not in _IN_PLACE_ERRORS:
                    raise
                os.remove(tmp)
                _write_in_place(raw, path)
        _CLEANED[directory] = _directory_version(directory)
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
