"""The environment a job ran in: interpreter, libraries, host, drivers, ascendbench's revision."""

from __future__ import annotations

import functools
import importlib
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

import ascendbench
from ascendbench.compat import library_versions
from ascendbench.verify.versions import cann_version, driver_version

GIT_TIMEOUT_S = 5.0
COLLECT_ENV_FILE = "collect_env.txt"  # torch.utils.collect_env's report, once per sweep
COLLECT_ENV_TIMEOUT_S = 60.0


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def source_revision() -> dict[str, Any]:
    """ascendbench's git revision and dirty flag (``None``: installed, or no git)."""
    root = Path(ascendbench.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return {"git_revision": None, "git_dirty": None}
    revision = _git(["rev-parse", "HEAD"], root)
    status = _git(["status", "--porcelain", "--untracked-files=no"], root)
    return {"git_revision": revision, "git_dirty": None if status is None else bool(status)}


@functools.lru_cache(maxsize=1)
def host_stack() -> dict[str, Any]:
    """CANN version and the accelerator drivers (kind -> version), read as ``verify`` reads them."""
    cann, cann_source = cann_version({"torch_version_cann": getattr(torch.version, "cann", None)})
    return {"cann": cann, "cann_source": cann_source,
            "drivers": {kind: version for kind, version, _ in driver_version(GIT_TIMEOUT_S)}}


def environment() -> dict[str, Any]:
    """Host, interpreter, library, driver and revision facts for the record."""
    return {
        "ascendbench": ascendbench.__version__, **source_revision(), **host_stack(),
        "torch_build": {"git_version": getattr(torch.version, "git_version", None),
                        "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None)},
        "python": sys.version.split()[0], "platform": platform.platform(),
        "hostname": socket.gethostname(), "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "torch_cuda": torch.version.cuda,
        "torch_cann": getattr(torch.version, "cann", None), "libraries": library_versions(),
        "hf_endpoint": os.environ.get("HF_ENDPOINT"),
        "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE"),
    }


def _collect_env_module() -> str:
    """torch_npu's collect_env where torch_npu is in use (it adds CANN), else torch's."""
    return ("torch_npu.utils.collect_env" if "torch_npu" in sys.modules
            else "torch.utils.collect_env")


def _pretty_env_info() -> str:
    # deferred: it asks pip, lscpu, npu-smi...
    return importlib.import_module(_collect_env_module()).get_pretty_env_info()


def collect_env_text(timeout_s: float = COLLECT_ENV_TIMEOUT_S) -> str:
    """The collect_env report under a header, or why there is none (raised, timed out)."""
    found: dict[str, str] = {}

    def collect() -> None:
        try:
            found["text"] = _pretty_env_info()
        except Exception as exc:  # a broken probe must not cost the sweep its summary
            found["error"] = f"{type(exc).__name__}: {exc}"

    started = time.monotonic()
    worker = threading.Thread(target=collect, name="collect_env", daemon=True)
    worker.start()
    worker.join(timeout_s)
    header = (f"# {_collect_env_module()}, written by ascendbench {ascendbench.__version__} at "
              f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} in {time.monotonic() - started:.1f} s\n")
    if "text" in found:
        return header + found["text"].rstrip("\n") + "\n"
    reason = found.get("error") or f"still running after {timeout_s:g} s (timeout)"
    return header + f"no report: {reason}\n"
