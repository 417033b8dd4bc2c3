"""The import drawing: every ascendbench package on a floor, every import pointing down or across.

``python scripts/layers.py`` (a development tool, not shipped) lists each import (module level or
inside a function) from a package to a package on a higher floor, and each pair of packages that
import each other; exit 1 when there is any. Floors, bottom first (a package imports only its own
floor and those below):

0. the package root, ``errors`` and ``backend_autoload`` (run by the root before torch is imported)
1. ``fileio``, ``compat``, ``progress``, ``digits``: plumbing
2. ``config``, ``precision``, ``devices``, ``metrics``, ``models``, ``patches``: the building blocks
3. ``tasks``, ``bench``, ``compare``, ``verify``, ``env``, ``graph``: what runs on them
4. ``baseline``: the CPU reference
5. ``job``: one job through its stages
6. ``report``, ``tracking``, ``acceptance``, ``validate``: tools over records and configs
7. ``callbacks``, ``cli``, and every ``__main__`` module: the applications (``python -m
   ascendbench``, ``python -m ascendbench.report``, the reference child ``python -m
   ascendbench.baseline``...)
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

FLOORS: tuple[tuple[str, ...], ...] = (
    ("ascendbench", "errors", "backend_autoload"),
    ("fileio", "compat", "npu_wheels", "progress", "digits"),
    ("config", "precision", "devices", "metrics", "models", "patches"),
    ("tasks", "bench", "compare", "verify", "env", "graph"),
    ("baseline",),
    ("job",),
    ("report", "tracking", "acceptance", "validate"),
    ("callbacks", "cli", "__main__"),
)
FLOOR = {room: number for number, rooms in enumerate(FLOORS) for room in rooms}
ROOT = Path(__file__).resolve().parents[1] / "ascendbench"


@dataclass(frozen=True)
class Arrow:
    """One import from a module of ``source`` (a package of ascendbench) to ``target``."""

    source: str
    target: str
    where: str  # file:line


def room(module: str) -> str:
    """The package of ascendbench a dotted module name belongs to (``ascendbench.job.stages`` ->
    ``job``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        if node.module == "ascendbench":
            return [f"ascendbench.{alias.name}" for alias in node.names]
        return [node.module] if node.module.startswith("ascendbench.") else []
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.startswith("ascendbench.")]
    return []


def arrows(root: Path = ROOT) -> Iterator[Arrow]:
    """Every import between two packages of ascendbench, wherever it sits in a module."""
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        # A package's ``__main__`` (``python -m ascendbench.report``) is an application: the top
        # floor.
        source = "__main__" if parts[-1] == "__main__" else room(
            ".".join(("ascendbench", *(parts[:-1] if parts[-1] == "__init__" else parts))))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in map(room, _targets(node)):
                if target != source:
                    yield Arrow(source, target, f"{path.relative_to(root.parent)}:{node.lineno}")


def problems(found: list[Arrow]) -> list[str]:
    """Arrows up, packages on no floor, and pairs of packages importing each other."""
    lines = []
    for rooms in ({a.source for a in found} | {a.target for a in found}) - set(FLOOR):
        lines.append(f"{rooms}: on no floor; add it to FLOORS in scripts/layers.py")
    for arrow in found:
        known = arrow.source in FLOOR and arrow.target in FLOOR
        if known and FLOOR[arrow.target] > FLOOR[arrow.source]:
            lines.append(f"up: {arrow.where}: {arrow.source} (floor {FLOOR[arrow.source]}) imports "
                         f"{arrow.target} (floor {FLOOR[arrow.target]})")
    pairs = {(a.source, a.target) for a in found}
    for source, target in sorted(pairs):
        if source < target and (target, source) in pairs:
            lines.append(f"both ways: {source} and {target} import each other")
    return lines


def main() -> int:
    """Print the problems (or the all-clear) and return the exit status."""
    found = list(arrows())
    lines = problems(found)
    for line in lines:
        print(line)
    print(f"layers: {len(found)} imports between packages, {len(lines)} problem(s)")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
