"""Atomic file writes: a temporary file in the target's directory, fsync, then ``os.replace``.

A reader (another job, a report, a resumed run) sees either the old file or the complete new one,
never a half-written one, and a write that fails leaves no temporary file behind::

    write_atomic(job_dir / "record.json", json.dumps(record))
    with atomic_path(entry / "outputs.safetensors") as tmp:   # for writers that take a path
        save_file(tensors, tmp)
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ascendbench.errors import AscendBenchError, OutputWriteError

# The process umask, read once at import: os.umask can only be read by setting it, which is not
# thread-safe later on (the reference cache is written from several threads in tests).
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def default_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file (``0o666`` less the umask).

    ``mkstemp`` creates files readable by their owner only; a shared cache or a job directory read
    by others needs the usual mode.
    """
    return 0o666 & ~_UMASK


def _fsync(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


@contextmanager
def atomic_path(path: str | os.PathLike[str], mode: int | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on a clean exit it is synced and renamed onto ``path``.

    Args:
        path: the file to (re)write; its directory is created when missing.
        mode: permission bits of the result; ``None`` gives :func:`default_mode`.

    On any exception inside the block (or while syncing or renaming) the temporary file is removed
    and the exception propagates; ``path`` keeps its previous content. A failed write (an ``OSError``, or
    safetensors' error, which names no file) becomes :class:`OutputWriteError` naming ``path``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise write_error(path, exc) from exc
    tmp = Path(name)
    try:
        yield tmp
        _fsync(tmp)
        os.chmod(tmp, default_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if _is_write_failure(exc):
            raise write_error(path, exc) from exc
        raise


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
_FULL_MARKERS = ("No space left", "StorageFull", "code: 28", "Disk quota")


def _is_write_failure(exc: BaseException) -> bool:
    """An error of the write itself (not of the code producing the content, nor already ours)."""
    if isinstance(exc, AscendBenchError):
        return False
    return isinstance(exc, OSError) or type(exc).__name__.endswith("SafetensorError")


def write_error(path: Path, exc: BaseException) -> OutputWriteError:
    """The one-paragraph error of a failed write of ``path``: which file, why, and what to do."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    code = getattr(exc, "errno", None)
    if code in _FULL or any(marker in text for marker in _FULL_MARKERS):
        hint = (f"the disk holding {path.parent} is full: free space there (`df -h {path.parent}`), lower "
                "`artifacts.max_tensor_mb` / set `artifacts.tensors=false`, or point the job at another disk "
                "(`hydra.run.dir=...`, `hydra.sweep.dir=...`, `baseline.cache_dir=...`)")
    elif code in _READ_ONLY:
        hint = (f"{path.parent} is not writable (read-only file system or no permission): point the job at a "
                "writable directory (`hydra.run.dir=...`, `hydra.sweep.dir=...`, `baseline.cache_dir=...`)")
    else:
        hint = f"check that {path.parent} is a writable directory with free space"
    return OutputWriteError(f"could not write {path} ({type(exc).__name__}: {text[:300]}); {hint}.")


def write_atomic(path: str | os.PathLike[str], data: bytes | str, mode: int | None = None) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically; returns ``path``.

    Args:
        path: the file to (re)write; its directory is created when missing.
        data: the whole new content.
        mode: permission bits of the result; ``None`` gives :func:`default_mode`.

    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "a" / "note.txt"
    >>> write_atomic(target, "hello").read_text()
    'hello'
    """
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_path(path, mode) as tmp:
        tmp.write_bytes(payload)
    return Path(path)


def open_regular(path: str | os.PathLike[str], follow: bool = True) -> int:
    """Open ``path`` for reading without blocking, and only when it is a regular file; returns the descriptor.

    A FIFO, a device or a socket named by data (a weights path, a cache file) would block a reader or read
    forever: it is refused with :class:`OSError` (``EINVAL``). ``follow=False`` refuses a symbolic link too.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device, socket or directory)", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`: a FIFO or device is refused)."""
    with os.fdopen(open_regular(path, follow), "rb") as handle:
        return handle.read()
