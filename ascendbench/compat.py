"""The oldest torch and diffusers supported, checked at start-up from metadata."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import importlib.util
import sys
from dataclasses import dataclass
from functools import cache
from typing import Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ascendbench.errors import UnsupportedVersionError

EXIT_UNSUPPORTED = 2
# config groups whose options need an optional extra -> the module it provides
EXTRA_GROUPS = {"search": "hydra_plugins.hydra_optuna_sweeper"}
RUN_WITHOUT = ("imageio-ffmpeg",)  # a missing one is listed only: its feature degrades, said so
# The libraries whose versions a record's env lists (accelerate, peft: offload and LoRA).
LIBRARIES = ("torch", "torch_npu", "diffusers", "transformers", "safetensors", "hydra-core",
             "numpy", "lpips", "scikit-image", "huggingface_hub", "accelerate", "peft")


@dataclass(frozen=True)
class Floor:
    """The oldest supported version of one distribution and how to install a newer one."""

    name: str
    minimum: str
    fix: str


FLOORS = (
    Floor("torch", "2.1", "On a CUDA host install a torch build for its CUDA (`pip install "
          "'torch>=2.1'` from the PyTorch index of that CUDA version); on an Ascend host install "
          "the torch and torch_npu pair that its CANN release supports (torch_npu's version "
          "table), then reinstall ascendbench onto it (`make install TORCH_SPEC=` or `make "
          "install-offline WHEELHOUSE=dir`)."),
    Floor("diffusers", "0.36", "Install a newer diffusers (`pip install 'diffusers>=0.36'`, or on "
          "a host without a package index, `make wheelhouse` on a connected host and `make "
          "install-offline WHEELHOUSE=dir` here)."),
)
VersionLookup = Callable[[str], "str | None"]


@cache  # a metadata scan of sys.path each (~1 ms); a record asks for a dozen, every job
def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (``None``: not installed), read once a
    process: what the process imported is what it runs."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """Installed versions by distribution name (``None`` when not installed)."""
    return {name: installed_version(name) for name in names}


def older_than(found: str, minimum: str) -> bool:
    """True when release ``found`` is older than ``minimum`` (an unparsable one is not judged).
    >>> older_than("2.0.1+cpu", "2.1"), older_than("2.1.0a0+git1234", "2.1")
    (True, False)"""
    try:
        return Version(found).release < Version(minimum).release
    except InvalidVersion:
        return False


def floor_problem(floor: Floor, found: str | None) -> str | None:
    """What is wrong with ``found`` against ``floor``, or ``None`` when it is supported."""
    if found is None:
        if importlib.util.find_spec(floor.name) is not None:
            return None  # importable without metadata (a source tree on PYTHONPATH): unknown
        return (f"ascendbench needs {floor.name} >= {floor.minimum}, and {floor.name} is not "
                f"installed in {sys.executable}. {floor.fix}")
    if older_than(found, floor.minimum):
        return (f"ascendbench needs {floor.name} >= {floor.minimum} (the oldest version it "
                f"supports), and {sys.executable} has {floor.name} {found}. {floor.fix}")
    return None


def require_supported(lookup: VersionLookup | None = None) -> None:
    """Raise UnsupportedVersionError when torch or diffusers is missing or below its floor."""
    lookup = lookup or installed_version
    problems = [p for p in (floor_problem(f, lookup(f.name)) for f in FLOORS) if p]
    if problems:
        raise UnsupportedVersionError("\n".join(problems))


def missing_extra(group: str) -> str | None:
    """How to install the extra that the options of config ``group`` need, when it is absent."""
    module = EXTRA_GROUPS.get(group)
    with contextlib.suppress(ModuleNotFoundError):  # its parent package is absent too
        if module is None or importlib.util.find_spec(module) is not None:
            return None
    return f"pip install 'ascendbench[{group}]'` (from a checkout: `pip install -e '.[{group}]'"


def exit_if_unsupported(lookup: VersionLookup | None = None) -> None:
    """The entry points' start-up check: one paragraph on stderr and exit 2 when unsupported."""
    try:
        require_supported(lookup)
    except UnsupportedVersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)


def ascendbench_requirements(requires: list[str] | None = None,
                             lookup: VersionLookup | None = None) -> list[tuple[Requirement, str]]:
    """(requirement, ``ok`` | ``MISSING`` | ``TOO OLD``) of each non-extra requirement."""
    if requires is None:
        try:
            requires = md.requires("ascendbench") or []
        except md.PackageNotFoundError:
            requires = []
    lookup, states = lookup or installed_version, []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        found = lookup(req.name)
        ok = not req.specifier or req.specifier.contains(found or "0", prereleases=True)
        states.append((req, "MISSING" if found is None else "ok" if ok else "TOO OLD"))
    return states


def report(lookup: VersionLookup | None = None,
           requires: Callable[[], list[str] | None] = lambda: None) -> int:
    """Print floors and requirements; 2: a floor unmet, 1: another missing or too old, else 0."""
    lookup = lookup or installed_version
    for floor in FLOORS:
        found = lookup(floor.name)
        ok = floor_problem(floor, found) is None
        print(f"{'ok' if ok else 'FAIL':8} {floor.name} >= {floor.minimum} (floor): "
              f"{found or 'not installed'}")
    states = ascendbench_requirements(requires(), lookup)
    lines = [f"{state:8} {req.name}{req.specifier}: {lookup(req.name) or 'not installed'}"
             for req, state in states]
    print("\n".join(lines) or "ascendbench is not installed: no requirement listed")
    try:
        require_supported(lookup)
    except UnsupportedVersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNSUPPORTED
    lacking = [f"{req.name}{req.specifier} ({state.lower()})" for req, state in states
               if state != "ok" and req.name not in RUN_WITHOUT]
    if lacking:
        print(f"error: {len(lacking)} requirement(s) of ascendbench are not usable in "
              f"{sys.executable}: {', '.join(lacking)}; a job would fail importing them. Install "
              "them without touching torch (`pip install --no-deps <wheel>`, or put their wheels "
              "in the wheelhouse: `make wheelhouse` on a host with a package index, then `make "
              "install-offline` again).", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ascendbench.compat [--help]``: :func:`report`'s exit status."""
    if {"-h", "--help"} & set(sys.argv[1:] if argv is None else argv):
        print("usage: python -m ascendbench.compat\n\nThe supported floors of torch and diffusers "
              "and every requirement of the installed ascendbench, with the versions found; exit 2 "
              "when a floor is not met, 1 when another requirement is missing or too old.")
        return 0
    return report()


if __name__ == "__main__":
    sys.exit(main())
