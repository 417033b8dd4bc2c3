"""Versions for ``ascendbench.verify``: the interpreter and libraries against ascendbench's own
requirements, CANN from whichever source exists, and the accelerator drivers.

Every source is a row of a lookup table; each is tried in order and the first that answers wins.
Nothing here imports torch_npu (the child probe of :mod:`ascendbench.verify.probe` does that) and
external commands run under a timeout.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterable

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

# Libraries shown on their own line; the other requirements share the "dependencies" line.
NAMED_LIBRARIES = ("torch", "diffusers", "transformers", "hydra-core")
ASCEND_ROOT = Path("/usr/local/Ascend")
_VERSION_LINE = re.compile(r"^\s*version\s*[=:]\s*(\S+)", re.IGNORECASE | re.MULTILINE)


def installed(name: str) -> str | None:
    """Installed version of a distribution, ``None`` when it is not installed (nothing imported)."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


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
        return "WARN", f"{here}; ascendbench is not installed, so its requirements cannot be read (run `make install`)"
    if SpecifierSet(spec).contains(here):
        return "PASS", f"{here} ({spec}) at {os.sys.executable}"
    return "FAIL", f"{here} does not satisfy Requires-Python {spec}: use a newer interpreter for .venv"


def _requirements() -> list[Requirement]:
    """ascendbench's own requirements that apply without extras."""
    try:
        lines = md.requires("ascendbench") or []
    except md.PackageNotFoundError:
        return []
    reqs = [Requirement(line) for line in lines]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _requirement_problem(req: Requirement) -> str | None:
    version = installed(req.name)
    if version is None:
        return f"{req.name} is not installed (needs {req})"
    if req.specifier and not req.specifier.contains(version, prereleases=True):
        return f"{req.name} {version} does not satisfy {req}"
    return None


def _torch_build() -> str:
    import torch

    cuda, cann = torch.version.cuda, getattr(torch.version, "cann", None)
    return ", ".join(x for x in (f"CUDA {cuda}" if cuda else "", f"CANN {cann}" if cann else "") if x) or "CPU build"


def library_statuses() -> list[tuple[str, str, str]]:
    """(name, status, detail) for the named libraries and one line for the other requirements."""
    reqs = {r.name.lower(): r for r in _requirements()}
    if not reqs:
        return [("dependencies", "WARN", "ascendbench is not installed; run `make install`")]
    rows = []
    for name in NAMED_LIBRARIES:
        req = reqs.pop(name, Requirement(name))
        problem = _requirement_problem(req)
        detail = problem or f"{installed(name)} ({req.specifier or 'any version'})"
        if name == "torch" and not problem:
            detail += f", {_torch_build()}"
        rows.append((name, "FAIL" if problem else "PASS", detail + ("; run `make install`" if problem else "")))
    problems = [p for p in map(_requirement_problem, reqs.values()) if p]
    if problems:
        rows.append(("dependencies", "FAIL", "; ".join(problems) + "; run `make install`"))
    else:
        rows.append(("dependencies", "PASS", f"{len(reqs)} other requirements satisfied: " + ", ".join(sorted(reqs))))
    return rows


def _version_in(path: Path) -> str | None:
    try:
        match = _VERSION_LINE.search(path.read_text(errors="replace"))
    except OSError:
        return None
    return match.group(1) if match else None


def _install_info_version(roots: Iterable[str | Path]) -> tuple[str, str] | None:
    """``ascend_*_install.info`` or ``version.cfg`` up to two levels under each CANN root."""
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for pattern in ("ascend_*_install.info", "*/ascend_*_install.info", "version.cfg", "*/version.cfg"):
            for path in sorted(root.glob(pattern)):
                if version := _version_in(path):
                    return version, str(path)
    return None


def cann_version(npu_probe: dict[str, Any]) -> tuple[str | None, str | None]:
    """(version, source) of CANN: torch_npu's own answer, ``torch.version.cann``, then install files."""
    if npu_probe.get("cann"):
        return npu_probe["cann"], "torch_npu.npu.utils.get_cann_version()"
    if npu_probe.get("torch_version_cann"):
        return npu_probe["torch_version_cann"], "torch.version.cann"
    roots = [os.environ.get(k) for k in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")]
    defaults = [ASCEND_ROOT / "ascend-toolkit" / "latest", ASCEND_ROOT / "cann"]
    found = _install_info_version([r for r in roots if r] + defaults)
    return found if found else (None, None)


def _ascend_version_file(timeout_s: float) -> str | None:
    return _version_in(ASCEND_ROOT / "driver" / "version.info")


def _npu_smi(timeout_s: float) -> str | None:
    out = run_command(["npu-smi", "info"], timeout_s)
    match = re.search(r"Version:\s*(\S+)", out or "")
    return match.group(1) if match else None


def _nvidia_proc(timeout_s: float) -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    return nvidia_proc_version(text)


def nvidia_proc_version(text: str) -> str | None:
    """The driver version in ``/proc/driver/nvidia/version`` (proprietary and open kernel modules).

    >>> nvidia_proc_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build")
    '580.159.04'
    >>> nvidia_proc_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 2023")
    '535.104.05'
    """
    match = re.search(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)*)\b", text)
    return match.group(1) if match else None


def _nvidia_smi(timeout_s: float) -> str | None:
    out = run_command(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], timeout_s)
    return out.strip().splitlines()[0] if out and out.strip() else None


# (driver kind, where the version is read, reader); the first answer per kind wins.
DRIVER_SOURCES: tuple[tuple[str, str, Callable[[float], str | None]], ...] = (
    ("Ascend", str(ASCEND_ROOT / "driver" / "version.info"), _ascend_version_file),
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
