"""Versions for ``verify``: interpreter, libraries, CANN, drivers (no torch_npu; timeouts)."""

from __future__ import annotations

import importlib.metadata as md
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from ascendbench.compat import ascendbench_requirements, installed_version
from ascendbench.npu_wheels import host_cann, version_in

NAMED_LIBRARIES = ("torch", "diffusers", "transformers", "hydra-core")  # one line each
ASCEND_ROOT = Path("/usr/local/Ascend")


def run_command(command: list[str], timeout_s: float) -> str | None:
    """stdout of a command, or ``None`` when it is missing, fails or exceeds ``timeout_s``."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def python_status() -> tuple[str, str]:
    """(status, detail) of this interpreter against ``Requires-Python``."""
    here = platform.python_version()
    try:
        spec = md.metadata("ascendbench")["Requires-Python"] or ""
    except md.PackageNotFoundError:
        return "WARN", (f"{here}; ascendbench is not installed, so its requirements cannot be read "
                        "(run `make install`)")
    if SpecifierSet(spec).contains(here):
        return "PASS", f"{here} ({spec}) at {sys.executable}"
    return "FAIL", (f"{here} does not satisfy Requires-Python {spec}: use a newer interpreter "
                    "for .venv")


def _problem(req: Requirement, state: str) -> str | None:
    if state == "MISSING":
        return f"{req.name} is not installed (needs {req})"
    if state == "TOO OLD":
        return f"{req.name} {installed_version(req.name)} does not satisfy {req}"
    return None


def _torch_build() -> str:
    import torch  # deferred: only the torch line needs torch itself

    cuda, cann = torch.version.cuda, getattr(torch.version, "cann", None)
    built = [f"CUDA {cuda}" if cuda else "", f"CANN {cann}" if cann else ""]
    return ", ".join(x for x in built if x) or "CPU build"


def library_statuses() -> list[tuple[str, str, str]]:
    """(name, status, detail) for the named libraries and one line for the other requirements."""
    states = {req.name.lower(): (req, state) for req, state in ascendbench_requirements()}
    if not states:
        return [("dependencies", "WARN", "ascendbench is not installed; run `make install`")]
    rows = []
    for name in NAMED_LIBRARIES:
        found = installed_version(name)
        req, state = states.pop(name, (Requirement(name), "ok" if found else "MISSING"))
        problem = _problem(req, state)
        detail = problem or f"{found} ({req.specifier or 'any version'})"
        if name == "torch" and not problem:
            detail += f", {_torch_build()}"
        rows.append((name, "FAIL" if problem else "PASS",
                     detail + ("; run `make install`" if problem else "")))
    problems = [p for p in (_problem(req, state) for req, state in states.values()) if p]
    if problems:
        rows.append(("dependencies", "FAIL", "; ".join(problems) + "; run `make install`"))
    else:
        rows.append(("dependencies", "PASS", f"{len(states)} other requirements satisfied: "
                     + ", ".join(sorted(states))))
    return rows


def cann_version(npu_probe: dict[str, Any]) -> tuple[str | None, str | None]:
    """(version, source) of CANN: torch_npu's own answer, ``torch.version.cann``, install files."""
    if npu_probe.get("cann"):
        return npu_probe["cann"], "torch_npu.npu.utils.get_cann_version()"
    if npu_probe.get("torch_version_cann"):
        return npu_probe["torch_version_cann"], "torch.version.cann"
    return host_cann() or (None, None)


def _npu_smi(timeout_s: float) -> str | None:
    match = re.search(r"Version:\s*(\S+)", run_command(["npu-smi", "info"], timeout_s) or "")
    return match.group(1) if match else None


def _nvidia_proc(timeout_s: float) -> str | None:
    try:
        return nvidia_proc_version(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return None


def nvidia_proc_version(text: str) -> str | None:
    """The driver version in ``/proc/driver/nvidia/version`` (proprietary and open modules).
    >>> nvidia_proc_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04")
    '580.159.04'"""
    match = re.search(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)*)\b", text)
    return match.group(1) if match else None


def _nvidia_smi(timeout_s: float) -> str | None:
    command = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    out = (run_command(command, timeout_s) or "").strip()
    return out.splitlines()[0] if out else None


# (driver kind, where the version is read, reader); the first answer per kind wins.
DRIVER_SOURCES: tuple[tuple[str, str, Callable[[float], str | None]], ...] = (
    ("Ascend", "/usr/local/Ascend/driver/version.info",
     lambda timeout_s: version_in(ASCEND_ROOT / "driver" / "version.info")),
    ("Ascend", "npu-smi info", _npu_smi),
    ("NVIDIA", "/proc/driver/nvidia/version", _nvidia_proc),
    ("NVIDIA", "nvidia-smi", _nvidia_smi),
)


def driver_version(timeout_s: float) -> list[tuple[str, str, str]]:
    """(kind, version, source) for each driver found."""
    found: dict[str, tuple[str, str, str]] = {}
    for kind, source, reader in DRIVER_SOURCES:
        if kind not in found and (version := reader(timeout_s)):
            found[kind] = (kind, version, source)
    return list(found.values())
