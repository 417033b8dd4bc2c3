"""``python -m ascendbench.baseline - | replay``: a job's clean CPU process (request on stdin)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib
import os
import signal
import sys
import threading
import time
from typing import Callable

PARENT_PID_ENV = "ASCENDBENCH_PARENT_PID"  # the job's pid (ascendbench.baseline.process.run_child)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ORPHANED = 3  # exit status when the job is gone before this process could start
USAGE = """usage: python -m ascendbench.baseline - | replay | msprobe | msprobe-device

The clean process of an ascendbench job: `-` computes its CPU reference, `replay` re-runs its
recorded modules (baseline.reference_mode=replay), `msprobe` / `msprobe-device` dump the
reference / device run under msprobe (compare.msprobe=true). It reads the job's request on stdin
only: a request file is not accepted. All but msprobe-device run without torch_npu. Jobs start
it, not people."""
# mode -> "<module of ascendbench.baseline>:<function>", imported after the guard (torch with it)
MODES = {"-": "compute:main", "replay": "replay_child:main", "msprobe": "compute:msprobe_main",
         "msprobe-device": "compute:msprobe_main"}


def watch_parent(parent: int, getppid: Callable[[], int] = os.getppid, interval_s: float = 1.0,
                 on_orphaned: Callable[[], None] = lambda: os._exit(ORPHANED)) -> threading.Thread:
    """A daemon thread calling ``on_orphaned`` once ``getppid()`` is no longer ``parent``."""

    def watch() -> None:
        while getppid() == parent:
            time.sleep(interval_s)
        on_orphaned()

    thread = threading.Thread(target=watch, name="ascendbench-parent-watch", daemon=True)
    thread.start()
    return thread


def hold_lifeline(environ: dict[str, str] | None = None) -> str:
    """Die with the job of ``ASCENDBENCH_PARENT_PID`` (pdeathsig, else a thread); exit 3."""
    value = (os.environ if environ is None else environ).get(PARENT_PID_ENV, "")
    if not value.isdigit():
        return "none"
    how = "watch"
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
                how = "pdeathsig"
    if os.getppid() != int(value):  # the job died before the death signal was armed
        print(f"the job (pid {value}) that started this reference process is gone; exiting",
              file=sys.stderr)
        raise SystemExit(ORPHANED)
    if how == "watch":
        watch_parent(int(value))
    return how


def block_torch_npu() -> None:
    """Make torch_npu unimportable (a ``RuntimeError`` if torch or torch_npu is imported)."""
    loaded = [name for name in ("torch_npu", "torch") if sys.modules.get(name) is not None]
    if loaded:
        raise RuntimeError(f"the reference process is not clean: {', '.join(loaded)} is imported")
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    sys.modules["torch_npu"] = None  # type: ignore[assignment]  # find_spec then says None too


def start(argv: list[str] | None = None) -> int:
    """Lifeline, then the torch_npu guard, then the reference, the replay or a msprobe dump."""
    args = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in args):
        print(USAGE)
        return 0
    if len(args) != 1 or args[0] not in MODES:  # never a request file: another user may write it
        print(USAGE, file=sys.stderr)
        return 2
    hold_lifeline()
    if args != ["msprobe-device"]:
        block_torch_npu()
    module, _, function = MODES[args[0]].partition(":")
    return getattr(importlib.import_module(f"ascendbench.baseline.{module}"), function)()


if __name__ == "__main__":
    raise SystemExit(start())
