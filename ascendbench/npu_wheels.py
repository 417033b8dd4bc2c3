"""Which torch_npu wheel matches this host's torch and CANN (stdlib only: runs before install)."""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
import sys
from pathlib import Path
from typing import NamedTuple


class Wheel(NamedTuple):
    """One torch_npu release: the torch it pins and its CANN (None: newer than the table)."""

    torch_npu: str
    torch: str
    cann: str | None


# COMPATIBILITY.en.md (active rows), newest CANN first, plus the two releases newer than the table
# (CANN None); each wheel pins the torch release its version starts with.
_BY_CANN = {None: "2.14.0 2.13.0",
            "9.1.0": "2.12.0 2.11.0 2.10.0.post4 2.9.0.post6 2.7.1.post8",
            "9.0.0": "2.9.0.post2 2.8.0.post4 2.7.1.post4",
            "8.5.0": "2.9.0 2.8.0.post2 2.7.1.post2 2.6.0.post5",
            "8.3.RC1": "2.8.0 2.7.1 2.6.0.post3 2.1.0.post17",
            "8.2.RC1": "2.6.0 2.5.1.post1 2.1.0.post13",
            "8.1.RC1": "2.5.1 2.4.0.post4 2.3.1.post6 2.1.0.post12",
            "8.0.0": "2.4.0.post2 2.3.1.post4 2.1.0.post10",
            "8.0.RC3": "2.4.0 2.3.1.post2 2.1.0.post8"}
WHEELS = tuple(Wheel(wheel, wheel.split(".post")[0], cann)
               for cann, wheels in _BY_CANN.items() for wheel in wheels.split())
CANN_ROOTS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann")
CANN_FILES = ("ascend_*_install.info", "*/ascend_*_install.info", "version.cfg", "*/version.cfg")
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
_VERSION_LINE = re.compile(r"^\s*version\s*[=:]\s*(\S+)", re.IGNORECASE | re.MULTILINE)


def torch_release(version: str) -> str:
    """``2.9.0`` of ``2.9.0+cpu``, ``2.9.0a0+git12ab`` or ``2.9.0.post1``."""
    match = _RELEASE.match(version.strip())
    return ".".join(match.groups()) if match else version


def cann_release(version: str) -> str:
    """``8.3.RC1`` of ``CANN 8.3.RC1`` / ``8.3.rc1.alpha002``; ``9.0.0`` of ``9.0.0.beta1``."""
    return ".".join(version.strip().upper().removeprefix("CANN").strip().split(".")[:3])


def wheels_for(torch_version: str, cann: str | None = None) -> list[Wheel]:
    """The torch_npu wheels for this torch (and CANN, when known), newest CANN first."""
    rows = [w for w in WHEELS if w.torch == torch_release(torch_version)]
    if cann:
        rows = ([w for w in rows if w.cann == cann_release(cann)]
                or [w for w in rows if w.cann is None])
    return rows


def advice(torch_version: str | None, cann: str | None, installed: str | None) -> tuple[str, str]:
    """``(status, text)`` for ``verify``: PASS when ``installed`` is the wheel for torch, CANN."""
    if torch_version is None:
        return "WARN", "torch is not installed: no torch_npu wheel can be chosen"
    rows, release = wheels_for(torch_version, cann), torch_release(torch_version)
    for_cann = f" and CANN {cann}" if cann else ""
    if not rows:
        known = ", ".join(sorted({w.torch for w in WHEELS}))
        return "WARN", (f"no torch_npu release pins torch {release}"
                        f"{f' for CANN {cann}' if cann else ''} (torch_npu exists for torch "
                        f"{known}); needed only for device=npu")
    if installed is not None and any(installed.split("+")[0] == w.torch_npu for w in rows):
        return "PASS", f"torch_npu {installed} is the wheel for torch {release}{for_cann}"
    names = ", ".join(f"torch_npu=={w.torch_npu} (CANN {w.cann or 'not in the table'})"
                      for w in rows)
    what = "the wheel" if len(rows) == 1 else "one of the wheels"
    found = f"torch_npu {installed} is installed; " if installed else ""
    why = "" if cann else " (CANN unknown here: pick the row of your CANN)"
    return ("FAIL" if installed else "WARN"), (
        f"{found}{what} for torch {release}{for_cann}: {names}{why}; install with "
        "`pip install --no-deps torch_npu==<version>`")


def install_hint(torch_version: str | None, cann: str | None) -> str:
    """How to install torch_npu without touching this host's torch (``--no-deps``)."""
    rows = wheels_for(torch_version, cann) if torch_version else []
    start = "on an Ascend host install CANN and the driver, then "
    end = " and `source /usr/local/Ascend/ascend-toolkit/set_env.sh`"
    release = torch_release(torch_version or "")
    if len(rows) == 1:
        return (f"{start}`pip install --no-deps torch_npu=={rows[0].torch_npu}` (the wheel for "
                f"torch {release}{f' and CANN {cann}' if cann else ''}){end}")
    if rows:  # CANN unknown here: one wheel per CANN release
        return (start + " or ".join(f"`pip install --no-deps torch_npu=={w.torch_npu}` (CANN "
                                    f"{w.cann or 'not in the table'})" for w in rows) + end)
    releases = sorted({w.torch for w in WHEELS}, key=lambda v: [int(x) for x in v.split(".")])
    known = ", ".join(releases)
    mine = f"torch {release} has none" if release else "torch is not installed"
    return (f"{start}keep a torch that a torch_npu release pins ({mine}; torch_npu exists for "
            f"torch {known}): on the Ascend image `make install TORCH_SPEC=` keeps its own torch "
            f"and adds the matching wheel{end}")


def host_hint() -> str:
    """:func:`install_hint` for the installed torch and the CANN toolkit found on this host."""
    try:
        torch_version = md.version("torch")
    except md.PackageNotFoundError:
        torch_version = None
    return install_hint(torch_version, (host_cann() or (None,))[0])


def version_in(path: Path) -> str | None:
    """The ``version=`` (or ``Version:``) value of an install or version file, or None."""
    try:
        match = _VERSION_LINE.search(path.read_text(errors="replace"))
    except OSError:
        return None
    return match.group(1) if match else None


def host_cann() -> tuple[str, str] | None:
    """(version, file) of the CANN toolkit ``set_env.sh`` points at, or the default install."""
    env = [os.environ.get(k) for k in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")]
    files = (path for root in (Path(r) for r in [*env, *CANN_ROOTS] if r) if root.is_dir()
             for pattern in CANN_FILES for path in sorted(root.glob(pattern)))
    return next(((version, str(path)) for path in files if (version := version_in(path))), None)


def main(argv: list[str] | None = None) -> int:
    """``--spec``: print the pip spec of the one matching wheel (else exit 1, why on stderr)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", action="store_true",
                        help="print `torch_npu==X` for this host's torch and CANN")
    parser.add_argument("--torch", help="torch version (default: the installed torch)")
    parser.add_argument("--cann", help="CANN version (default: the toolkit's install file)")
    args = parser.parse_args(argv)
    try:
        torch_version = args.torch or md.version("torch")
    except md.PackageNotFoundError:
        print("npu_wheels: torch is not installed", file=sys.stderr)
        return 1
    cann = args.cann or (host_cann() or (None,))[0]
    rows = wheels_for(torch_version, cann)
    if args.spec and len(rows) == 1:
        print(f"torch_npu=={rows[0].torch_npu}")
        return 0
    print(advice(torch_version, cann, None)[1], file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
