"""``python -m ascendbench.acceptance [device=cpu|cuda|npu] [out=DIR] [cache=DIR] [only=a,b]``."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import torch

from ascendbench.acceptance.checks import CHECKS, Check, Suite
from ascendbench.compat import exit_if_unsupported
from ascendbench.fileio import write_atomic

USAGE = ("usage: python -m ascendbench.acceptance [device=cpu|cuda|npu] [out=DIR] [cache=DIR] "
         "[only=check,...]; device defaults to cuda when available, else cpu; out defaults to "
         "acceptance/")
OPTIONS = ("device", "out", "cache", "only")


def write_report(checks: list[Check], out: Path, device: str) -> None:
    """acceptance.md (one table) and acceptance.json beside it."""
    lines = [f"# Acceptance on {device}", "", "| check | status | figure | detail |",
             "|---|---|---|---|"]
    for c in checks:
        detail = c.detail.replace("|", "/").replace("\n", " ")[:300]
        lines.append(f"| {c.name} | {c.status} | {c.figure} | {detail} |")
    write_atomic(out / "acceptance.md", "\n".join(lines) + "\n")
    write_atomic(out / "acceptance.json",
                 json.dumps([asdict(c) for c in checks], indent=1, default=str))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checks; exit 1 when any failed, 2 on a usage error."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(arg in ("-h", "--help") for arg in args):
        print(USAGE)
        return 0
    pairs = [word.partition("=") for word in args]
    if any(not sep or key not in OPTIONS for key, sep, _ in pairs):
        print(USAGE, file=sys.stderr)
        return 2
    options = {key: value for key, _, value in pairs}
    exit_if_unsupported()  # torch/diffusers below the supported floor: one paragraph, exit 2

    device = options.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    out = Path(options.get("out") or "acceptance")
    suite = Suite(device, out / "work", Path(options["cache"]) if options.get("cache") else None)
    only = set(filter(None, options.get("only", "").split(",")))
    results: list[Check] = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        if only and name not in only:
            continue
        start = time.perf_counter()
        try:
            found = check(suite)
        except Exception as exc:  # noqa: BLE001 - a broken check is a FAIL line, not a lost report
            found = [Check(name, "FAIL", "the check itself failed", f"{type(exc).__name__}: {exc}")]
        for item in found:
            print(f"{item.status:4}  {item.name:24} {item.figure}  "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
        results += found
        write_report(results, out, device)
    failed = sum(c.status == "FAIL" for c in results)
    print(f"acceptance on {device}: {len(results) - failed} of {len(results)} not failed; report "
          f"{out}/acceptance.md")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
