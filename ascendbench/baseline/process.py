"""The reference's own process (``baseline.process=child``): started with its request on stdin, followed while
it runs (its progress lines turned into the job's heartbeat), and explained when it ends badly (the exit status,
the signal, the memory it had reached against the estimate, the end of its log).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ascendbench.errors import BaselineError
from ascendbench.precision import dtype_name

if TYPE_CHECKING:
    from ascendbench.baseline.service import ReferenceQuery

log = logging.getLogger(__name__)

CHILD_LOG = "baseline_child.log"
PARENT_PID_ENV = "ASCENDBENCH_PARENT_PID"  # the child dies when this process does (ascendbench.baseline.__main__)


def _tail(path: Path, lines: int = 25) -> str:
    text = path.read_text(errors="replace").splitlines() if path.is_file() else []
    return "\n".join(text[-lines:])


@dataclass
class ChildExit:
    """How the reference process ended: ``code`` (negative: killed by that signal) and its peak RSS."""

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


def _wait_child(proc: subprocess.Popen) -> ChildExit:
    """Wait for ``proc`` (killing it if this process is interrupted) and read its peak RSS from ``wait4``."""
    try:
        if not hasattr(os, "wait4"):
            return ChildExit(proc.wait())
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    ended = child_exit(status, usage)
    proc.returncode = ended.code
    return ended


def child_exit(status: int, usage: Any) -> ChildExit:
    """The :class:`ChildExit` of a ``wait4`` result. A forked child's high-water mark includes the pages it
    shared with this process before ``exec``: only a peak above this process's own is surely the reference's
    (else ``peak_rss_bytes`` is ``None``)."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    peak, own = int(usage.ru_maxrss) * scale, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    return ChildExit(os.waitstatus_to_exitcode(status), peak if peak > own else None)


def _size(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e8 else f"{n_bytes / 1e6:.0f} MB"


def _estimate_bytes(query: ReferenceQuery) -> float | None:
    """The estimated host memory of the reference run, for a failure message (``None``: not estimable)."""
    if query.module is None:
        return None
    try:
        from ascendbench.models.memory import run_memory

        return run_memory(query.module, query.task, query.inputs, query.precision).total
    except Exception as exc:  # an estimate must not hide the failure it explains
        log.debug("no memory estimate for the failure message: %s", exc)
        return None


def _child_failure(ended: ChildExit, log_path: Path, query: ReferenceQuery) -> str:
    """The one-paragraph error of a reference process that did not exit 0."""
    tail = _tail(log_path)
    last = f" Last lines of its log:\n{tail}\n" if tail else " Its log is empty. "
    if ended.signal_name is None:
        return (f"the CPU reference process (python -m ascendbench.baseline) exited with status {ended.code}; its log "
                f"is {log_path}.{last}Fix the cause above, or run with baseline.enabled=false for a "
                "performance-only run.")
    estimate = _estimate_bytes(query)
    oom = ", possibly the out-of-memory killer (see `dmesg` or `journalctl -k`)" if ended.code == -9 else ""
    need = f"; the reference needed about {_size(estimate)} (estimate)" if estimate is not None else ""
    peak = f", and the process had reached {_size(ended.peak_rss_bytes)} resident" if ended.peak_rss_bytes else ""
    return (f"the CPU reference process (python -m ascendbench.baseline, {dtype_name(query.precision)}) was killed "
            f"by {ended.signal_name}{oom}{need}{peak}. Its log is {log_path}.{last}Free host memory, choose a smaller "
            "preset, or set baseline.reference=float32; baseline.enabled=false runs performance only.")


def _send_request(proc: subprocess.Popen, request: Mapping[str, Any]) -> None:
    """Write ``request`` to the child's stdin and close it (a child that died first is reported by its exit)."""
    try:
        proc.stdin.write(json.dumps(request, default=str).encode())
        proc.stdin.close()
    except BrokenPipeError:
        log.debug("the reference process closed its stdin before reading the request")


def run_child(request: Mapping[str, Any], query: ReferenceQuery) -> dict[str, Any]:
    """Compute the reference in ``python -m ascendbench.baseline -``: the request over stdin, the job following
    its progress; the wall time, log and peak RSS, or a :class:`BaselineError` paragraph when it did not exit 0."""
    query.store.entry(request["key"]).mkdir(parents=True, exist_ok=True)
    log_path = Path(query.log_dir) / CHILD_LOG
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PYTHONUNBUFFERED": "1",
           PARENT_PID_ENV: str(os.getpid())}
    log.info("CPU reference in a clean child process (torch_npu blocked); log: %s", log_path)
    start = time.perf_counter()
    with open(log_path, "w") as handle:  # the request goes over stdin: no file another user could swap
        proc = subprocess.Popen([sys.executable, "-m", "ascendbench.baseline", "-"], stdin=subprocess.PIPE,
                                stdout=handle, stderr=subprocess.STDOUT, env=env)
        _send_request(proc, request)
        ended = wait_with_progress(proc, log_path, f"reference (cpu {request['precision']})")
    if ended.code != 0:
        raise BaselineError(_child_failure(ended, log_path, query))
    return {"wall_s": time.perf_counter() - start, "log": str(log_path),
            "peak_rss_mb": None if ended.peak_rss_bytes is None else ended.peak_rss_bytes / 1e6}


# --- Progress of the reference process while the job waits for it ---------------------


@dataclass
class ProgressWait:
    """How the job follows its reference process: the label of its heartbeat, how often it polls, and (for
    tests) the sleep function and the :class:`ascendbench.progress.ProgressOptions` (clock, stream, mode)."""

    label: str
    poll_s: float = 0.5
    sleep: Any = time.sleep
    options: Any = None


def _progress_lines(log_path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The progress payloads the child wrote to its log after byte ``offset`` (complete lines only), and the
    new offset."""
    from ascendbench.baseline.child import PROGRESS_PREFIX

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


def follow_child_progress(poll: Any, log_path: Path, wait: ProgressWait) -> Any:
    """Call ``poll()`` (the child's exit, or ``None`` while it runs) every ``wait.poll_s`` until it returns,
    showing the child's progress lines as a bar (terminal) or a heartbeat line at most every 15 s (elsewhere,
    carrying the job's name): ``[job] reference (cpu float64): 3/8 blocks, 41.0 s, ETA 60.0 s``."""
    from ascendbench.progress import Progress

    progress, offset = Progress(wait.label, unit="blocks", options=wait.options), 0
    try:
        while (ended := poll()) is None:
            payloads, offset = _progress_lines(log_path, offset)
            for payload in payloads:
                if payload.get("total") and progress.total is None:  # the count starts: ETA from here
                    progress.close()
                    progress = Progress(wait.label, total=int(payload["total"]), unit=str(payload.get("unit")),
                                        options=wait.options)
                progress.update(max(int(payload.get("done", 0)) - progress.done, 0))
            progress.tick()
            wait.sleep(wait.poll_s)
    finally:
        progress.close()
    return ended


def wait_with_progress(proc: subprocess.Popen, log_path: Path, label: str) -> ChildExit:
    """:func:`_wait_child` with the child's progress shown meanwhile (see :func:`follow_child_progress`)."""
    if not hasattr(os, "wait4"):
        return _wait_child(proc)
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux

    def poll() -> ChildExit | None:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == 0:
            return None
        proc.returncode = os.waitstatus_to_exitcode(status)
        return ChildExit(proc.returncode, int(usage.ru_maxrss) * scale)

    try:
        return follow_child_progress(poll, log_path, ProgressWait(label))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
