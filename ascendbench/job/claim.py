"""A job directory, checked, then claimed for the job's life with a file lock."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import time
from pathlib import Path

from filelock import FileLock, Timeout

from ascendbench.errors import JobDirBusyError, JobDirError
from ascendbench.fileio import links_inside, read_regular
from ascendbench.job.record import RECORD_NAME

LOCK_NAME = ".ascendbench.lock"
MIN_FREE_MB = 16  # below this a job could not even write its record, log and config
_HELD: dict[str, FileLock] = {}  # job dir (absolute) -> its acquired lock


def _unusable(key: str, path: Path, why: str) -> JobDirError:
    return JobDirError(
        f"{key}={path} cannot be used as the job directory: {why}. The job writes record.json, its "
        f"log and its artifacts there and nothing was written. Point {key} at a writable directory "
        f"with free space, e.g. `{key}=/tmp/ascendbench/job`.")


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return f"a path component is longer than the file system allows ({exc.strerror})"
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        return f"{exc.filename or 'a path component'} is a file, not a directory"
    return f"{exc.strerror or type(exc).__name__} ({exc.filename or ''})".replace(" ()", "")


def check_job_dir(job_dir: Path | str, key: str = "hydra.run.dir") -> Path:
    """Create ``job_dir`` if needed, check a job can write there (JobDirError); return it."""
    path = Path(job_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unusable(key, path, _os_reason(exc)) from exc
    record = path / RECORD_NAME
    if record.exists() and not record.is_file():
        raise _unusable(key, path, f"{record} exists and is not a file (remove it, or choose "
                                   "another directory)")
    if links := links_inside(path):
        more = f" (and {len(links) - 1} more)" * (len(links) > 1)
        raise _unusable(key, path, f"{links[0]} is a symbolic link{more}, and ascendbench never "
                                   "writes through one (remove the links, or choose another "
                                   "directory)")
    try:
        probe = path / f".ascendbench-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise _unusable(key, path, f"it is not writable: {_os_reason(exc)}") from exc
    free_mb = shutil.disk_usage(path).free / 2**20
    if free_mb < MIN_FREE_MB:
        raise _unusable(key, path, f"its disk has only {free_mb:.1f} MB free (a job needs at least "
                                   f"{MIN_FREE_MB} MB)")
    return path


def holder_of(job_dir: Path | str) -> str:
    """Who holds (or last held) the lock of ``job_dir``, as written in its lock file."""
    try:
        info = json.loads(read_regular(Path(job_dir) / LOCK_NAME, follow=False) or b"{}")
    except (OSError, ValueError):
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')}, since {info.get('since')}"


def claim(job_dir: Path | str, key: str | None = None) -> bool:
    """Lock ``job_dir`` of ``key``: ``True`` newly claimed, ``False`` held (JobDirBusyError)."""
    path = Path(os.path.abspath(str(job_dir)))
    if str(path) in _HELD:
        return False
    lock_path, name = path / LOCK_NAME, key or "the job directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unusable(name, path, _os_reason(exc)) from exc
    if lock_path.is_symlink():
        raise _unusable(name, path, f"{lock_path} is a symbolic link, and a lock file is never "
                                    "written through one (remove the link)")
    lock = FileLock(str(lock_path), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout as exc:
        raise JobDirBusyError(
            f"{f'{key}={path}' if key else f'the job directory {path}'} is in use by another "
            f"ascendbench process ({holder_of(path)}): two runs in one directory would overwrite "
            "each other's records, so this one ran nothing there and left its files as they are. "
            "Wait for that process to end, then run the same command again (jobs that ended ok "
            f"are skipped), or give this run its own `{key or 'hydra.run.dir'}={path}-2`.") from exc
    except OSError as exc:  # a link planted after the check: the lock opens without following it
        raise _unusable(name, path, _os_reason(exc)) from exc
    _HELD[str(path)] = lock
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    flags = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
    # a full disk: the lock holds, only its holder is unnamed
    with contextlib.suppress(OSError), open(os.open(lock_path, flags), "w") as handle:
        handle.truncate(0)
        handle.write(json.dumps(info))
    return True


def release(job_dir: Path | str) -> None:
    """Give the lock of ``job_dir`` back (a no-op when this process does not hold it)."""
    lock = _HELD.pop(os.path.abspath(str(job_dir)), None)
    if lock is not None:
        lock.release()
