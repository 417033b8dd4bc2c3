"""A job's clean CPU process: request on stdin, progress lines as heartbeat, failures explained."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ascendbench.baseline.__main__ import PARENT_PID_ENV
from ascendbench.errors import BaselineError
from ascendbench.progress import Progress

CHILD_LOG = "baseline_child.log"
PROGRESS_PREFIX = "ascendbench-progress "
RSS_SCALE = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux


@dataclass
class ChildExit:
    """How the process ended: ``code`` (negative: killed by that signal) and its peak RSS."""

    code: int
    peak_rss_bytes: int | None = None

    @property
    def signal_name(self) -> str | None:
        """``SIGKILL``... when a signal ended it."""
        if self.code >= 0:
            return None
        try:
            return signal.Signals(-self.code).name
        except ValueError:
            return f"signal {-self.code}"


def _progress_lines(log_path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The progress payloads of the complete lines after byte ``offset``, and the new offset."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except OSError:
        return [], offset
    complete = chunk[:chunk.rfind(b"\n") + 1]
    payloads = []
    for line in complete.decode(errors="replace").splitlines():
        if line.startswith(PROGRESS_PREFIX):
            try:
                payloads.append(json.loads(line[len(PROGRESS_PREFIX):]))
            except ValueError:
                continue
    return payloads, offset + len(complete)


def follow_child_progress(poll: Callable[[], Any], log_path: Path, label: str, options: Any = None,
                          sleep: Callable[[float], None] = time.sleep) -> Any:
    """``poll()`` every 0.5 s until it returns the exit, the child's progress shown meanwhile."""
    progress, offset = Progress(label, unit="blocks", options=options), 0
    try:
        while (ended := poll()) is None:
            payloads, offset = _progress_lines(log_path, offset)
            for payload in payloads:
                if payload.get("total") and progress.total is None:  # counting starts: an ETA
                    progress.close()
                    progress = Progress(label, total=int(payload["total"]),
                                        unit=str(payload.get("unit")), options=options)
                progress.update(max(int(payload.get("done", 0)) - progress.done, 0))
            progress.tick()
            sleep(0.5)
    finally:
        progress.close()
    return ended


def _wait(proc: subprocess.Popen, log_path: Path, label: str) -> ChildExit:
    """Wait for ``proc`` with its progress shown (killed if this process is interrupted)."""
    def poll() -> ChildExit | None:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == 0:
            return None
        proc.returncode = os.waitstatus_to_exitcode(status)
        return ChildExit(proc.returncode, int(usage.ru_maxrss) * RSS_SCALE)

    try:
        return follow_child_progress(poll, log_path, label)
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _size(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e8 else f"{n_bytes / 1e6:.0f} MB"


def _failure(ended: ChildExit, log_path: Path, what: str, estimate: float | None) -> str:
    lines = log_path.read_text(errors="replace").splitlines()[-25:] if log_path.is_file() else []
    if ended.code == 2 and lines:  # an ascendbench error, printed last: the cause, whole
        return f"{what} failed: {lines[-1]} (its log: {log_path})"
    last = " Last lines of its log:\n" + "\n".join(lines) + "\n" if lines else " Its log is empty. "
    if ended.signal_name is None:
        return (f"{what} exited with status {ended.code}; its log is {log_path}.{last}Fix the "
                "cause above, or run with baseline.enabled=false for a performance-only run.")
    oom = ", possibly the out-of-memory killer (see `dmesg` or `journalctl -k`)"
    need = f"; the reference needed about {_size(estimate)} (estimate)" if estimate else ""
    peak = ended.peak_rss_bytes
    reached = f", and the process had reached {_size(peak)} resident" if peak else ""
    return (f"{what} was killed by {ended.signal_name}{oom if ended.code == -9 else ''}{need}"
            f"{reached}. Its log is {log_path}.{last}Free host memory, choose a smaller preset, or "
            "a lower reference precision (baseline.reference=float32, "
            "baseline.replay.precision=float32); baseline.enabled=false runs performance only.")


def run_child(mode: str, request: Mapping[str, Any], log_path: Path, label: str,
              estimate: Callable[[], float | None] = lambda: None) -> dict[str, Any]:
    """Run ``python -m ascendbench.baseline <mode>``, ``request`` on stdin; wall time, log, RSS."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
           "PYTHONUNBUFFERED": "1", PARENT_PID_ENV: str(os.getpid())}
    start = time.perf_counter()
    with open(log_path, "w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "ascendbench.baseline", mode], env=env,
                                stdin=subprocess.PIPE, stdout=handle, stderr=subprocess.STDOUT)
        with contextlib.suppress(BrokenPipeError):  # it died at once: its status and log say why
            proc.stdin.write(json.dumps(request, default=str).encode())
            proc.stdin.close()
        ended = _wait(proc, log_path, label)
    if ended.code != 0:
        what = f"the {label} process (python -m ascendbench.baseline {mode})"
        raise BaselineError(_failure(ended, log_path, what, estimate()))
    return {"wall_s": time.perf_counter() - start, "log": str(log_path),
            "peak_rss_mb": None if ended.peak_rss_bytes is None else ended.peak_rss_bytes / 1e6}
