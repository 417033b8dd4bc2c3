"""A job directory is checked and claimed before a job uses it.

* :func:`check_job_dir` refuses, in one paragraph, a directory the job could not write its record into: one
  that cannot be created (read-only file system, no permission, a name too long, a file in the way), a
  ``record.json`` there that is not a file, or a disk with almost no space left.
* :func:`claim` takes an exclusive lock (``<job dir>/.ascendbench.lock``, ``fcntl.flock``) held for the job's
  life: two jobs given the same ``hydra.run.dir`` at once, or the same sweep started twice into one sweep dir,
  cannot overwrite each other's record. The second claimant gets :class:`JobDirBusyError` naming the holder;
  the lock file is left in place (removing it would race with a new claimant) and the operating system drops
  the lock when the holding process ends, however it ends.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import time
from pathlib import Path

from ascendbench.errors import JobDirBusyError, JobDirError
from ascendbench.fileio import default_mode
from ascendbench.job.record import RECORD_NAME

LOCK_NAME = ".ascendbench.lock"
MIN_FREE_MB = 16  # below this a job could not even write its record, log and config
_HELD: dict[str, int] = {}  # job dir (absolute) -> the open, locked descriptor of its lock file


def _key(job_dir: Path | str) -> str:
    return os.path.abspath(str(job_dir))


def _unusable(key: str, path: Path, why: str) -> JobDirError:
    return JobDirError(
        f"{key}={path} cannot be used as the job directory: {why}. The job writes record.json, its log and its "
        f"artifacts there and nothing was written. Point {key} at a writable directory with free space, e.g. "
        f"`{key}=/tmp/ascendbench/job`."
    )


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return f"a path component is longer than the file system allows ({exc.strerror})"
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        return f"{exc.filename or 'a path component'} is a file, not a directory"
    return f"{exc.strerror or type(exc).__name__} ({exc.filename or ''})".replace(" ()", "")


def check_job_dir(job_dir: Path | str, key: str = "hydra.run.dir") -> Path:
    """Create ``job_dir`` if needed and make sure a job can write there; return it.

    Raises:
        JobDirError: the directory cannot be created or written, is a file, holds a ``record.json`` that is
            not a file, or its disk has less than :data:`MIN_FREE_MB` MB free.
    """
    path = Path(job_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unusable(key, path, _os_reason(exc)) from exc
    record = path / RECORD_NAME
    if record.exists() and not record.is_file():
        raise _unusable(key, path, f"{record} exists and is not a file (remove it, or choose another directory)")
    try:
        probe = path / f".ascendbench-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise _unusable(key, path, f"it is not writable: {_os_reason(exc)}") from exc
    free_mb = shutil.disk_usage(path).free / 2**20
    if free_mb < MIN_FREE_MB:
        raise _unusable(key, path, f"its disk has only {free_mb:.1f} MB free (a job needs at least {MIN_FREE_MB} MB)")
    return path


def holder_of(job_dir: Path | str) -> str:
    """Who holds (or last held) the lock of ``job_dir``, as written in its lock file."""
    try:
        info = json.loads((Path(job_dir) / LOCK_NAME).read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')}, since {info.get('since')}"


def claim(job_dir: Path | str) -> bool:
    """Lock ``job_dir`` for this process; ``True`` when newly claimed, ``False`` when this process held it.

    Raises:
        JobDirBusyError: another process holds the directory.
        JobDirError: the lock file cannot be created there.
    """
    key = _key(job_dir)
    if key in _HELD:
        return False
    path = Path(key)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, default_mode())
    except OSError as exc:
        raise _unusable("the job directory", path, _os_reason(exc)) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise _unusable("the job directory", path, _os_reason(exc)) from exc
        raise JobDirBusyError(
            f"the job directory {path} is in use by another ascendbench job ({holder_of(path)}): two jobs writing "
            "one directory would overwrite each other's record.json, so this one did not run and left that "
            f"job's files as they are. Wait for it to end, or give this job its own directory (e.g. "
            f"`hydra.run.dir={path}-2`, or `hydra.sweep.dir=...` for a sweep)."
        ) from exc
    _write_holder(fd)
    _HELD[key] = fd
    return True


def _write_holder(fd: int) -> None:
    info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
    except OSError:  # a full disk: the lock holds all the same, only the holder's name is missing
        pass


def release(job_dir: Path | str) -> None:
    """Give the lock of ``job_dir`` back (a no-op when this process does not hold it)."""
    fd = _HELD.pop(_key(job_dir), None)
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def held(job_dir: Path | str) -> bool:
    """Whether this process holds the lock of ``job_dir``."""
    return _key(job_dir) in _HELD
