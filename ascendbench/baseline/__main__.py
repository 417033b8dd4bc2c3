"""``python -m ascendbench.baseline -``: the clean reference process (its request on stdin).

It first ties its life to the job that started it (:func:`hold_lifeline`: a job killed with SIGKILL takes its
reference process with it), then the torch_npu guard runs, before anything imports torch or diffusers; this
works because ``ascendbench/__init__.py`` and ``ascendbench/baseline/__init__.py`` import nothing heavy.
Importing this module does neither: both happen in :func:`start`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from typing import Callable

PARENT_PID_ENV = "ASCENDBENCH_PARENT_PID"  # set by ascendbench.baseline.process.run_child
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ORPHANED = 3  # exit status when the job is gone before the reference process could start


def set_parent_death_signal(signum: int = signal.SIGKILL) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``);
    ``False`` where that is not available (other systems, no libc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def watch_parent(parent: int, getppid: Callable[[], int] = os.getppid, interval_s: float = 1.0,
                 on_orphaned: Callable[[], None] = lambda: os._exit(ORPHANED)) -> threading.Thread:
    """Start a daemon thread that calls ``on_orphaned`` once ``getppid()`` is no longer ``parent`` (the parent
    died and the process was re-parented): the fallback where ``PR_SET_PDEATHSIG`` does not exist."""

    def watch() -> None:
        while getppid() == parent:
            time.sleep(interval_s)
        on_orphaned()

    thread = threading.Thread(target=watch, name="ascendbench-parent-watch", daemon=True)
    thread.start()
    return thread


def hold_lifeline(environ: dict[str, str] | None = None) -> str:
    """Die with the job that started this process (its pid is in ``ASCENDBENCH_PARENT_PID``).

    Returns how: ``pdeathsig`` (Linux), ``watch`` (a parent-pid watch thread), or ``none`` (no parent pid
    given: started by hand). Exits at once with status 3 when the job is already gone.
    """
    value = (os.environ if environ is None else environ).get(PARENT_PID_ENV, "")
    if not value.isdigit():
        return "none"
    parent = int(value)
    how = "pdeathsig" if set_parent_death_signal() else "watch"
    if os.getppid() != parent:  # the job died before the death signal was armed
        print(f"the job (pid {parent}) that started this reference process is gone; exiting", file=sys.stderr)
        raise SystemExit(ORPHANED)
    if how == "watch":
        watch_parent(parent)
    return how


USAGE = """usage: python -m ascendbench.baseline -

The clean CPU reference process of an ascendbench job (baseline.process=child): it reads the request the job
sends on its stdin (never from a file), runs the reference without torch_npu, and writes the outputs into
the baseline cache. Jobs start it; there is no need to run it by hand."""


def start(argv: list[str] | None = None) -> int:
    """Lifeline, then the torch_npu guard, then the reference (:func:`ascendbench.baseline.child.main`)."""
    args = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in args):
        print(USAGE)
        return 0
    hold_lifeline()
    from ascendbench.baseline.guard import block_torch_npu

    block_torch_npu()
    from ascendbench.baseline.child import main

    return main(args)


if __name__ == "__main__":
    raise SystemExit(start())
