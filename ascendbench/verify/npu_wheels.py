"""Which torch_npu wheel matches this host's torch and CANN: the table ``make install`` and ``verify`` use.

Each torch_npu wheel pins one torch release in its METADATA (``Requires-Dist: torch==2.9.0+cpu`` on x86_64 and
``torch==2.9.0`` on aarch64 for 2.9.0 and 2.9.0.post2; ``torch ==2.12.0`` for 2.12.0; ``torch==2.14.0.*`` for 2.14.0,
read from the registry's wheels) and is built for one CANN release (Ascend/pytorch ``COMPATIBILITY.en.md``, "TorchNPU
version mapping table", master @9e73e708, Aug 2026). Two wheels for one torch differ in CANN (2.9.0 -> CANN 8.5.0,
2.9.0.post2 -> 9.0.0, 2.9.0.post6 -> 9.1.0), so the torch version alone does not name the wheel: a plain
``pip install torch_npu`` may take one for a newer CANN (or upgrade torch). 2.13.0 and 2.14.0 are newer than that
table: their CANN is not known here.

Stdlib only, so ``make install`` can run it before ascendbench is installed:
``python ascendbench/verify/npu_wheels.py --spec [--torch 2.9.0] [--cann 9.0.0]`` prints ``torch_npu==2.9.0.post2``.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
import sys
from pathlib import Path
from typing import NamedTuple


class Wheel(NamedTuple):
    """One torch_npu release: the torch it pins and the CANN it is built for (None: not in the table)."""

    torch_npu: str
    torch: str
    cann: str | None


# COMPATIBILITY.en.md (active rows), newest CANN first, plus the two releases newer than the table.
WHEELS = (
    Wheel("2.14.0", "2.14.0", None), Wheel("2.13.0", "2.13.0", None), Wheel("2.12.0", "2.12.0", "9.1.0"),
    Wheel("2.11.0", "2.11.0", "9.1.0"), Wheel("2.10.0.post4", "2.10.0", "9.1.0"),
    Wheel("2.9.0.post6", "2.9.0", "9.1.0"), Wheel("2.7.1.post8", "2.7.1", "9.1.0"),
    Wheel("2.9.0.post2", "2.9.0", "9.0.0"), Wheel("2.8.0.post4", "2.8.0", "9.0.0"),
    Wheel("2.7.1.post4", "2.7.1", "9.0.0"), Wheel("2.9.0", "2.9.0", "8.5.0"), Wheel("2.8.0.post2", "2.8.0", "8.5.0"),
    Wheel("2.7.1.post2", "2.7.1", "8.5.0"), Wheel("2.6.0.post5", "2.6.0", "8.5.0"),
    Wheel("2.8.0", "2.8.0", "8.3.RC1"), Wheel("2.7.1", "2.7.1", "8.3.RC1"), Wheel("2.6.0.post3", "2.6.0", "8.3.RC1"),
    Wheel("2.1.0.post17", "2.1.0", "8.3.RC1"), Wheel("2.6.0", "2.6.0", "8.2.RC1"),
    Wheel("2.5.1.post1", "2.5.1", "8.2.RC1"), Wheel("2.1.0.post13", "2.1.0", "8.2.RC1"),
    Wheel("2.5.1", "2.5.1", "8.1.RC1"), Wheel("2.4.0.post4", "2.4.0", "8.1.RC1"),
    Wheel("2.3.1.post6", "2.3.1", "8.1.RC1"), Wheel("2.1.0.post12", "2.1.0", "8.1.RC1"),
    Wheel("2.4.0.post2", "2.4.0", "8.0.0"), Wheel("2.3.1.post4", "2.3.1", "8.0.0"),
    Wheel("2.1.0.post10", "2.1.0", "8.0.0"), Wheel("2.4.0", "2.4.0", "8.0.RC3"),
    Wheel("2.3.1.post2", "2.3.1", "8.0.RC3"), Wheel("2.1.0.post8", "2.1.0", "8.0.RC3"),
)
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def torch_release(version: str) -> str:
    """``2.9.0`` of ``2.9.0+cpu``, ``2.9.0a0+git12ab`` or ``2.9.0.post1``."""
    match = _RELEASE.match(version.strip())
    return ".".join(match.groups()) if match else version


def cann_release(version: str) -> str:
    """``8.3.RC1`` of ``CANN 8.3.RC1`` / ``8.3.rc1.alpha002``; ``9.0.0`` of ``9.0.0.beta1``: the table's form."""
    parts = version.strip().upper().removeprefix("CANN").strip().split(".")
    return ".".join(parts[:3])


def wheels_for(torch_version: str, cann: str | None = None) -> list[Wheel]:
    """The torch_npu wheels for this torch (and CANN, when known), newest CANN first."""
    rel = torch_release(torch_version)
    rows = [w for w in WHEELS if w.torch == rel]
    if cann:
        rows = [w for w in rows if w.cann == cann_release(cann)] or [w for w in rows if w.cann is None]
    return rows


def advice(torch_version: str | None, cann: str | None, installed: str | None) -> tuple[str, str]:
    """``(status, text)`` for ``verify``: PASS when ``installed`` is the wheel for this torch and CANN."""
    if torch_version is None:
        return "WARN", "torch is not installed: no torch_npu wheel can be chosen"
    rows = wheels_for(torch_version, cann)
    if not rows:
        known = sorted({w.torch for w in WHEELS})
        return "WARN", (f"no torch_npu release pins torch {torch_release(torch_version)}"
                        + (f" for CANN {cann}" if cann else "") + f" (torch_npu exists for torch {', '.join(known)}); "
                        "needed only for device=npu")
    names = ", ".join(f"torch_npu=={w.torch_npu} (CANN {w.cann or 'not in the table'})" for w in rows)
    if installed is not None and any(installed.split("+")[0] == w.torch_npu for w in rows):
        return "PASS", f"torch_npu {installed} is the wheel for torch {torch_release(torch_version)}" + (
            f" and CANN {cann}" if cann else "")
    what = "the wheel" if len(rows) == 1 else "one of the wheels"
    found = f"torch_npu {installed} is installed; " if installed else ""
    why = "" if cann else " (CANN unknown here: pick the row of your CANN)"
    return ("FAIL" if installed else "WARN"), (f"{found}{what} for torch {torch_release(torch_version)}"
                                               + (f" and CANN {cann}" if cann else "") + f": {names}{why}; install "
                                               f"with `pip install --no-deps torch_npu==<version>`")


def host_cann() -> str | None:
    """The CANN version of the toolkit ``set_env.sh`` points at (``ascend_toolkit_install.info`` ``version=``)."""
    roots = [os.environ.get(k) for k in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")] + [
        "/usr/local/Ascend/ascend-toolkit/latest"]
    for root in (Path(r) for r in roots if r):
        infos = sorted(root.glob("*/ascend_toolkit_install.info")) + sorted(root.glob("ascend_toolkit_install.info"))
        for info in infos:
            match = re.search(r"^version=(\S+)", info.read_text(errors="replace"), re.MULTILINE)
            if match:
                return match.group(1)
    return None


def main(argv: list[str] | None = None) -> int:
    """``--spec``: print the pip spec of the one matching wheel (exit 1, a reason on stderr, when not exactly one)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", action="store_true", help="print `torch_npu==X` for this host's torch and CANN")
    parser.add_argument("--torch", help="torch version (default: the installed torch)")
    parser.add_argument("--cann", help="CANN version (default: the toolkit's ascend_toolkit_install.info)")
    args = parser.parse_args(argv)
    try:
        torch_version = args.torch or md.version("torch")
    except md.PackageNotFoundError:
        print("npu_wheels: torch is not installed", file=sys.stderr)
        return 1
    cann = args.cann or host_cann()
    rows = wheels_for(torch_version, cann)
    if args.spec and len(rows) == 1:
        print(f"torch_npu=={rows[0].torch_npu}")
        return 0
    print(advice(torch_version, cann, None)[1], file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
