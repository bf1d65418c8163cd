"""Atomic local file writes for mmengine's runners.

mmengine 0.10.7 writes checkpoints with ``LocalBackend.put`` straight into the final file,
so a job killed mid-write leaves a truncated ``epoch_N.pth`` (and ``last_checkpoint``
pointing at it), and a failed write clobbers the previous file of that name. After
:func:`enable_atomic_local_writes`, ``put`` / ``put_text`` write a temporary file in the same
directory, flush it to disk and ``os.replace`` it over the target: readers see the old file
or the complete new one, never a partial one.
"""
import os
import os.path as osp
import tempfile
from pathlib import Path
from typing import Union


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it; put it back at once
    os.umask(mask)
    return mask


def atomic_write(data: Union[bytes, str], filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
    """Write ``data`` to ``filepath`` via a temporary file and ``os.replace``.

    The file gets the permissions a plain ``open(filepath, 'w')`` would give it (``0o666``
    minus the umask), not ``mkstemp``'s private ``0o600``.
    """
    filepath = str(filepath)
    directory = osp.dirname(osp.abspath(filepath))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(filepath)}.', suffix='.tmp',
                               dir=directory)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data.encode(encoding) if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, filepath)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise


def enable_atomic_local_writes() -> None:
    """Make mmengine's ``LocalBackend.put`` / ``put_text`` atomic. Idempotent."""
    from mmengine.fileio.backends.local_backend import LocalBackend
    if getattr(LocalBackend, '_mmevt_atomic', False):
        return

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        atomic_write(obj, filepath)

    def put_text(self, obj: str, filepath: Union[str, Path], encoding: str = 'utf-8') -> None:
        atomic_write(obj, filepath, encoding)

    LocalBackend.put = put
    LocalBackend.put_text = put_text
    LocalBackend._mmevt_atomic = True
