"""Print ``name==version`` of every installed distribution ascendbench needs at run time (its
requirements without an extra, and theirs, recursively), less what an accelerator image brings
itself: torch, torchvision, torch_npu and torch's own CUDA/Triton wheels. ``make wheelhouse``
downloads exactly these for the target Python and platform, so an offline install lacks nothing.

    python scripts/wheel_set.py [--extra search] ...
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HOST_BRINGS = re.compile(r"^(torch|torchvision|torch-npu|triton|nvidia-.*|cuda-.*)$")


def closure(root: str = "ascendbench", extras: tuple[str, ...] = ()) -> dict[str, str]:
    """{canonical name: installed version} of ``root``'s run-time requirements, recursively."""
    found: dict[str, str] = {}
    todo = [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in ("", *wanted)):
                continue
            key = canonicalize_name(req.name)
            if key in found or HOST_BRINGS.match(key):
                continue
            try:
                found[key] = md.version(req.name)
            except md.PackageNotFoundError:
                print(f"wheel_set: {req.name} (needed by {name}) is not installed here",
                      file=sys.stderr)
                continue
            todo.append((req.name, tuple(req.extras)))
    return found


def main(argv: list[str] | None = None) -> int:
    """Print the set, one ``name==version`` per line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extra", action="append", default=[], help="an ascendbench extra too")
    args = parser.parse_args(argv)
    print("\n".join(f"{n}=={v}" for n, v in sorted(closure(extras=tuple(args.extra)).items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
