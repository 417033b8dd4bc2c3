"""Atomic writes (fsync, ``os.replace``; OutputWriteError names the file); link-free reads."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ascendbench.errors import AscendBenchError, OutputWriteError

# The umask, read once at import: os.umask reads only by setting, which is not thread-safe later.
_UMASK = os.umask(0o022)
os.umask(_UMASK)
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
_FULL_MARKERS = ("No space left", "StorageFull", "code: 28", "Disk quota")


def default_mode() -> int:
    """The mode a plain ``open(path, "w")`` gives a new file (``mkstemp``'s is owner-only)."""
    return 0o666 & ~_UMASK


@contextmanager
def atomic_path(path: str | os.PathLike[str], mode: int | None = None) -> Iterator[Path]:
    """A temporary path beside ``path``, synced and renamed onto it (``mode``) on clean exit."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise _write_error(path, exc) from exc
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, default_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        write_failure = isinstance(exc, OSError) or type(exc).__name__.endswith("SafetensorError")
        if write_failure and not isinstance(exc, AscendBenchError):  # not the content's own error
            raise _write_error(path, exc) from exc
        raise


def links_inside(directory: str | os.PathLike[str], depth: int = 3) -> list[Path]:
    """Symbolic links ``depth`` levels below ``directory`` (unfollowed): where writes escape."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    found = [Path(entry.path) for entry in entries if entry.is_symlink()]
    return found + [link for entry in entries if depth > 1 and entry.is_dir(follow_symlinks=False)
                    for link in links_inside(entry.path, depth - 1)]


def _write_error(path: Path, exc: BaseException) -> OutputWriteError:
    text = " ".join(str(exc).split()) or type(exc).__name__
    code = getattr(exc, "errno", None)
    where = path.parent
    if code in _FULL or any(marker in text for marker in _FULL_MARKERS):
        hint = (f"the disk holding {where} is full: free space there (`df -h {where}`), lower "
                "`artifacts.max_tensor_mb` / set `artifacts.tensors=false`, or point the job at "
                "another disk (`hydra.run.dir=...`, `hydra.sweep.dir=...`, "
                "`baseline.cache_dir=...`)")
    elif code in _READ_ONLY:
        hint = (f"{where} is not writable (read-only file system or no permission): point the job "
                "at a writable directory (`hydra.run.dir=...`, `hydra.sweep.dir=...`, "
                "`baseline.cache_dir=...`)")
    else:
        hint = f"check that {where} is a writable directory with free space"
    return OutputWriteError(f"could not write {path} ({type(exc).__name__}: {text[:300]}); {hint}.")


def write_atomic(path: str | os.PathLike[str], data: bytes | str, mode: int | None = None) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically (see :func:`atomic_path`); ``path``.
    >>> import tempfile, pathlib
    >>> write_atomic(pathlib.Path(tempfile.mkdtemp()) / "a" / "note.txt", "hello").read_text()
    'hello'"""
    with atomic_path(path, mode) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else bytes(data))
    return Path(path)


def open_regular(path: str | os.PathLike[str], follow: bool = True) -> int:
    """A descriptor of ``path`` if a regular file (no blocking), else OSError (``follow``: link)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device, socket or directory)",
                          str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (a FIFO or device is refused, see open_regular)."""
    with os.fdopen(open_regular(path, follow), "rb") as handle:
        return handle.read()
