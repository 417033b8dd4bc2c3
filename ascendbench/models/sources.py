"""Where weights come from: a local directory, a local file, or a hub id resolved with huggingface_hub.

``HF_ENDPOINT`` (mirrors) and ``HF_HUB_OFFLINE`` are honoured by huggingface_hub itself; the local
cache is always tried first, so a cached snapshot is used without touching the network.

Pickle checkpoints (``.bin``, ``.pt``, ``.pth``, ``.ckpt``, ``.pkl``) execute code when unpickled: they
are refused with :class:`UnsafeWeightsError` unless the caller passes ``allow_pickle=True``
(``model.allow_pickle=true``); safetensors files are always preferred when both are present.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ascendbench.errors import UnsafeWeightsError, WeightsLoadError
from ascendbench.fileio import open_regular

log = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
WEIGHT_PATTERNS = ("*.json", "*.safetensors")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


@dataclass(frozen=True)
class ResolvedSource:
    """Weights found on disk: ``kind`` is ``dir`` or ``file``; ``origin`` says how they were found."""

    kind: str
    path: Path
    origin: str
    files: tuple[Path, ...] = field(default=())
    pickle: bool = False


@dataclass(frozen=True)
class NotFound:
    """No weights: the reason, written for the user, and what was looked at."""

    reason: str


def hub_offline() -> bool:
    """True when huggingface_hub is told not to reach the network (``HF_HUB_OFFLINE``)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def looks_like_hub_id(source: str) -> bool:
    """``owner/name`` that is not an existing or explicitly local path."""
    return bool(_HUB_ID.match(source)) and not source.startswith((".", "/", "~"))


def resolve_source(source: str | None, subfolder: str | None = None, revision: str | None = None,
                   allow_pickle: bool = False, allow_network: bool = True):
    """Find weights for ``model.source``; return :class:`ResolvedSource` or :class:`NotFound`.

    ``allow_network=False`` looks at local paths and the hub cache only (the dry-run plan).

    Raises:
        UnsafeWeightsError: only pickle weights were found and ``allow_pickle`` is false.
    """
    if not source:
        return NotFound("model.source is empty")
    path = Path(os.path.expanduser(str(source)))
    if path.exists():
        return _local(path, subfolder, allow_pickle)
    if not looks_like_hub_id(str(source)):
        return NotFound(f"the local path {path} does not exist")
    return _from_hub(str(source), subfolder, revision, allow_pickle, allow_network)


def pickle_refused(path: Path) -> UnsafeWeightsError:
    """The refusal of a pickle checkpoint (for every loader that finds one without model.allow_pickle=true)."""
    return UnsafeWeightsError(
        f"{path} is a pickle checkpoint ({path.suffix or 'pickle files'}): unpickling can run code stored in "
        "the file, so ascendbench reads only safetensors by default. Convert it once (`python -c \"import torch; "
        "from safetensors.torch import save_file; save_file(torch.load('in.bin', weights_only=True), "
        "'out.safetensors')\"`) and point model.source at the result, or, if you trust where it came from, "
        "set `model.allow_pickle=true` (it is then read with torch.load(weights_only=True))."
    )


def _local(path: Path, subfolder: str | None, allow_pickle: bool = False) -> ResolvedSource | NotFound:
    if not path.is_file() and not path.is_dir():
        raise WeightsLoadError(f"model.source={path} is not a regular file or a directory (a FIFO, device or "
                               "socket), so no weights can be read from it: point model.source at a .safetensors "
                               "file or a model directory.")
    if path.is_file():
        if path.suffix in PICKLE_SUFFIXES:
            if not allow_pickle:
                raise pickle_refused(path)
            return ResolvedSource("file", path.resolve(), "local file (pickle, model.allow_pickle=true)",
                                  (path.resolve(),), pickle=True)
        if path.suffix != ".safetensors":
            return NotFound(f"{path} is not a .safetensors file (only safetensors weights are read)")
        return ResolvedSource("file", path.resolve(), "local file", (path.resolve(),))
    root = path / subfolder if subfolder else path
    files = tuple(sorted(root.glob("*.safetensors")))
    irregular = [p for p in files if not p.is_file()]
    if irregular:  # a FIFO or device would block the digest (and the dry run) forever
        raise WeightsLoadError(f"{irregular[0]} is not a regular file (a FIFO, device, socket or directory), so it "
                               "cannot be read as weights: replace it with the .safetensors file itself, or point "
                               "model.source at another directory (model.weights=random runs without weights).")
    pickles = tuple(sorted(p for p in root.glob("*") if p.suffix in PICKLE_SUFFIXES))
    if (root / "config.json").is_file() and not files and pickles:
        if not allow_pickle:
            raise pickle_refused(pickles[0])
        return ResolvedSource("dir", path.resolve(), "local directory (pickle, model.allow_pickle=true)",
                              pickles, pickle=True)
    if not (root / "config.json").is_file() or not files:
        return NotFound(f"{root} has no config.json with *.safetensors weights beside it")
    return ResolvedSource("dir", path.resolve(), "local directory", files)


def _from_hub(repo_id: str, subfolder: str | None, revision: str | None, allow_pickle: bool = False,
              allow_network: bool = True) -> ResolvedSource | NotFound:
    from huggingface_hub import snapshot_download

    suffixes = WEIGHT_PATTERNS + tuple(f"*{s}" for s in PICKLE_SUFFIXES) * bool(allow_pickle)
    patterns = [f"{subfolder}/{p}" if subfolder else p for p in suffixes]
    attempts = [True] if hub_offline() or not allow_network else [True, False]
    reasons = []
    for local_only in attempts:
        try:
            snapshot = snapshot_download(
                repo_id, revision=revision, allow_patterns=patterns, local_files_only=local_only
            )
        except Exception as exc:  # huggingface_hub raises many unrelated types for "not there"
            reasons.append(_hub_failure(local_only, exc))
            continue
        found = _local(Path(snapshot), subfolder, allow_pickle)
        if isinstance(found, ResolvedSource):
            origin = f"hub {repo_id} ({'local cache' if local_only else 'downloaded'})"
            return ResolvedSource(found.kind, found.path, origin, found.files, found.pickle)
        reasons.append(found.reason)
    mode = ("offline (HF_HUB_OFFLINE=1), nothing cached" if hub_offline() else
            "not in the local cache (network not tried)" if not allow_network else "cache and hub both failed")
    return NotFound(f"hub id {repo_id!r}: {mode}; " + " | ".join(reasons))


def _hub_failure(local_only: bool, exc: Exception) -> str:
    """One short line per failed attempt (huggingface_hub messages span several lines)."""
    if local_only:
        return "not in the local hub cache"
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"hub not reachable or repo not found ({type(exc).__name__}: {first_line[:120]})"


def files_digest(files: tuple[Path, ...], chunk: int = 1 << 24) -> str:
    """SHA256 over the names and bytes of ``files`` (sorted), as ``sha256:<hex>``."""
    return files_digests(files, chunk)[0]


def files_digests(files: tuple[Path, ...], chunk: int = 1 << 24) -> tuple[str, list[str], list[int]]:
    """``(files_digest, sha256sum lines, sizes)`` in one read of ``files`` (sorted): the digest over names and
    bytes, each file's own SHA256 as ``sha256sum`` prints it (``<hex>  <name>``, what a model card or a seed
    report quotes) and each file's size in bytes."""
    digest, lines, sizes = hashlib.sha256(), [], []
    for path in sorted(files):
        digest.update(path.name.encode())
        own, size = hashlib.sha256(), 0
        with os.fdopen(open_regular(path), "rb") as handle:  # a FIFO is refused, never waited on
            while block := handle.read(chunk):
                digest.update(block)
                own.update(block)
                size += len(block)
        lines.append(f"{own.hexdigest()}  {path.name}")
        sizes.append(size)
    return "sha256:" + digest.hexdigest(), lines, sizes
