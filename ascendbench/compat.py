"""The oldest torch and diffusers ascendbench supports, checked at start-up before either is imported.

Accelerator hosts bring their own torch (Ascend: the torch + torch_npu pair of their CANN release; a CUDA
image: its torch), so ascendbench states a floor and keeps to the APIs that exist there:

* torch >= 2.1 (``pyproject.toml``). The APIs ascendbench uses were checked against torch 2.1.2's own
  source; where a newer name exists it is read with a fallback (the profiler's ``self_device_time_total``,
  2.4, falls back to ``self_cuda_time_total``; ``flop_counter.flop_registry``, 2.2, to ``flop_mapping``;
  ``torch.OutOfMemoryError``, 2.5, to ``torch.cuda.OutOfMemoryError``), and the ``flex_attention_dense``
  patch, which needs torch 2.5, says so in its own check. Tested on torch 2.14.1 (CI) and 2.11 (an H200).
* diffusers >= 0.36: the first release with ``AutoencoderKLFlux2`` (the FLUX.2 decoder).

Versions are read from the installed distributions' metadata, so nothing is imported: a torch too old
for ascendbench's own imports still gets one readable paragraph instead of a traceback.
``python -m ascendbench.compat`` prints every floor and every requirement of the installed ascendbench
(what ``make install-offline`` runs after installing from a wheelhouse).
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import sys
from dataclasses import dataclass
from typing import Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ascendbench.errors import UnsupportedVersionError

EXIT_UNSUPPORTED = 2


@dataclass(frozen=True)
class Floor:
    """The oldest supported version of one distribution and how to install a newer one."""

    name: str
    minimum: str
    fix: str


FLOORS = (
    Floor("torch", "2.1", "On a CUDA host install a torch build for its CUDA (`pip install 'torch>=2.1'` from the "
          "PyTorch index of that CUDA version); on an Ascend host install the torch and torch_npu pair that its "
          "CANN release supports (torch_npu's version table), then reinstall ascendbench onto it "
          "(`make install TORCH_SPEC=` or `make install-offline WHEELHOUSE=dir`)."),
    Floor("diffusers", "0.36", "Install a newer diffusers (`pip install 'diffusers>=0.36'`, or on a host without "
          "a package index, `make wheelhouse` on a connected host and `make install-offline WHEELHOUSE=dir` here)."),
)
VersionLookup = Callable[[str], "str | None"]


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name``; ``None`` when it is not installed."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def older_than(found: str, minimum: str) -> bool:
    """True when release ``found`` is older than ``minimum``; pre-release and local tags count as their release
    (``2.1.0a0+git1234``, an Ascend or source build, is 2.1.0). An unparsable version is not judged.

    >>> older_than("2.0.1+cpu", "2.1"), older_than("2.1.0a0+git1234", "2.1"), older_than("2.11.0+cu130", "2.1")
    (True, False, False)
    """
    try:
        return Version(found).release < Version(minimum).release
    except InvalidVersion:
        return False


def floor_problem(floor: Floor, found: str | None) -> str | None:
    """The paragraph saying what is wrong with ``found`` against ``floor``, or ``None`` when it is supported."""
    if found is None:
        if importlib.util.find_spec(floor.name) is not None:
            return None  # importable without metadata (a source tree on PYTHONPATH): its version is unknown
        return (f"ascendbench needs {floor.name} >= {floor.minimum}, and {floor.name} is not installed in "
                f"{sys.executable}. {floor.fix}")
    if older_than(found, floor.minimum):
        return (f"ascendbench needs {floor.name} >= {floor.minimum} (the oldest version it supports), and "
                f"{sys.executable} has {floor.name} {found}. {floor.fix}")
    return None


def require_supported(lookup: VersionLookup | None = None) -> None:
    """Raise :class:`UnsupportedVersionError` when torch or diffusers is missing or below its floor.

    Args:
        lookup: distribution name -> installed version (``None`` when absent); default
            :func:`installed_version`.
    """
    lookup = lookup or installed_version
    problems = [p for p in (floor_problem(f, lookup(f.name)) for f in FLOORS) if p]
    if problems:
        raise UnsupportedVersionError("\n".join(problems))


def exit_if_unsupported(lookup: VersionLookup | None = None) -> None:
    """The start-up check of the command-line entry points: one paragraph on stderr and exit 2 when unsupported."""
    try:
        require_supported(lookup)
    except UnsupportedVersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)


def requirement_lines(requires: list[str] | None, lookup: VersionLookup | None = None) -> list[str]:
    """``name spec: found <version>`` for each requirement (extras left out), ``MISSING``/``TOO OLD`` marked."""
    lookup, lines = lookup or installed_version, []
    for text in requires or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        found = lookup(req.name)
        state = ("MISSING" if found is None
                 else "ok" if not req.specifier or req.specifier.contains(found, prereleases=True) else "TOO OLD")
        lines.append(f"{state:8} {req.name}{req.specifier}: {found or 'not installed'}")
    return lines


def ascendbench_requires() -> list[str] | None:
    """The installed ascendbench's requirement strings (``None`` when it is not installed as a distribution)."""
    try:
        return md.requires("ascendbench")
    except md.PackageNotFoundError:
        return None


def report(lookup: VersionLookup | None = None,
           requires: Callable[[], list[str] | None] = ascendbench_requires) -> int:
    """Print the floors and ascendbench's requirements; 2 when a floor is not met, else 0.

    A missing requirement that is not a floor is listed (``MISSING``) without failing: a host may do without
    some (imageio-ffmpeg: mp4 files are then skipped with a warning; the Slurm launcher).
    """
    lookup = lookup or installed_version
    for floor in FLOORS:
        found = lookup(floor.name)
        ok = floor_problem(floor, found) is None
        print(f"{'ok' if ok else 'FAIL':8} {floor.name} >= {floor.minimum} (floor): {found or 'not installed'}")
    print("\n".join(requirement_lines(requires(), lookup)) or "ascendbench is not installed: no requirement listed")
    try:
        require_supported(lookup)
    except UnsupportedVersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNSUPPORTED
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ascendbench.compat [--help]``: :func:`report`'s exit status."""
    if {"-h", "--help"} & set(sys.argv[1:] if argv is None else argv):
        print("usage: python -m ascendbench.compat\n\nThe supported floors of torch and diffusers and every "
              "requirement of the installed ascendbench, with the versions found; exit 2 when a floor is not met.")
        return 0
    return report()


if __name__ == "__main__":
    sys.exit(main())


# The libraries whose versions a record's env lists (read from metadata, never imported).
LIBRARIES = ("torch", "torch_npu", "diffusers", "transformers", "safetensors", "hydra-core",
             "numpy", "lpips", "scikit-image", "huggingface_hub",
             "accelerate", "peft")  # model CPU offload and LoRA of the pipelines depend on these two


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """Installed versions by distribution name (``None`` when not installed); nothing is imported."""
    versions = {}
    for name in names:
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return versions
