"""Who holds a reference's lock, and how a waiting job sees time: the owner file's facts (pid, host, since when,
job), whether that process is alive, the heartbeat while waiting, and the request files older versions left."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ascendbench.fileio import read_regular

HEARTBEAT_S = 15.0  # at most one "still waiting for the lock" line per this many seconds


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


@dataclass
class LockWait:
    """How a job got the baseline lock: the seconds it waited and who held it meanwhile (``None``: nobody)."""

    seconds: float = 0.0
    holder: dict[str, Any] | None = None


@dataclass
class LockClock:
    """Time as the lock's wait sees it (a fake one in tests): ``now`` (seconds), the real poll of the lock file
    (``poll_s``) and the heartbeat period (``heartbeat_s``)."""

    now: Callable[[], float] = time.monotonic
    poll_s: float = 1.0
    heartbeat_s: float = HEARTBEAT_S


REQUEST_GLOB = "request-*.json"


def request_pid(path: Path) -> int | None:
    """The job pid in a ``request-<pid>.json`` name (``None`` when the name is not of that form)."""
    digits = path.name[len("request-"):-len(".json")]
    return int(digits) if digits.isdigit() else None


def request_host(path: Path) -> str | None:
    """The host a left-over request file names as its owner (``None``: unreadable or not said)."""
    try:
        return json.loads(read_regular(path, follow=False)).get("owner", {}).get("host")
    except (OSError, ValueError, AttributeError):
        return None


def lock_owner(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a lock holder writes about itself: pid, host, since (UTC and epoch seconds), plus ``extra``."""
    now = time.time()
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                      time.gmtime(now)),
            "since_epoch": now, **(extra or {})}


def describe_holder(holder: Mapping[str, Any] | None) -> str:
    """``pid 123 on host h since 2026-...Z (for 75 s), job /path`` or why the holder is unknown."""
    if not holder or "pid" not in holder:
        return "an unknown process (no owner file: an older ascendbench, or it is just starting)"
    text = f"pid {holder['pid']} on host {holder.get('host', '?')} since {holder.get('since', '?')}"
    if isinstance(holder.get("since_epoch"), (int, float)):
        text += f" (for {max(0.0, time.time() - holder['since_epoch']):.0f} s)"
    return text + (f", job {holder['job']}" if holder.get("job") else "")


def lock_timeout(path: Path, timeout_s: float, holder: Mapping[str, Any]) -> str:
    """The paragraph of a job that waited longer than ``baseline.lock_timeout_s`` for another job's lock."""
    return (f"another job, {describe_holder(holder)}, has held the baseline lock {path} for more than "
            f"baseline.lock_timeout_s={timeout_s:g} s while computing the same reference. Wait for it, raise "
            "baseline.lock_timeout_s, or if that process is not running any more remove the stale lock file.")
