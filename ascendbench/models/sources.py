"""Where weights come from and their digests; pickles are refused unless ``model.allow_pickle``."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from ascendbench.compat import installed_version
from ascendbench.errors import UnsafeWeightsError, WeightsDigestError, WeightsLoadError
from ascendbench.fileio import open_regular

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
_HEX = re.compile(r"^[0-9a-f]{64}$")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
_PIPELINE_FILES = ("*.txt", "*.model", "tokenizer*")  # a pipeline directory's tokenizer files


@dataclass(frozen=True)
class ResolvedSource:
    """Weights found on disk: ``kind`` is ``dir`` or ``file``; ``origin`` says how found."""

    kind: str
    path: Path
    origin: str
    files: tuple[Path, ...] = ()
    pickle: bool = False


@dataclass(frozen=True)
class NotFound:
    """No weights, and why (written for the user)."""

    reason: str


@dataclass(frozen=True)
class Layout:
    """How a loader's weights lie on disk (read from the loader's attributes of the same names)."""

    subfolder: str | None = None
    filename: str | None = None
    allow_pickle: bool = False
    pipeline: bool = False

    @classmethod
    def of(cls, loader: Any) -> Layout:
        """The layout a loader object declares (any attribute it lacks keeps its default)."""
        return cls(getattr(loader, "subfolder", None), getattr(loader, "filename", None),
                   bool(getattr(loader, "allow_pickle", False)),
                   bool(getattr(loader, "pipeline", False)))


def hub_offline() -> bool:
    """True when huggingface_hub is told not to reach the network (``HF_HUB_OFFLINE``)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


@contextlib.contextmanager
def hub_forced_offline() -> Iterator[None]:
    """huggingface_hub answers from its cache only inside this block (nothing is downloaded)."""
    from huggingface_hub import constants  # deferred: the hub client only where a lookup happens

    saved_env, saved_flag = os.environ.get("HF_HUB_OFFLINE"), constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"], constants.HF_HUB_OFFLINE = "1", True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved_flag
        if saved_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved_env


def hub_download() -> str:
    """The download command of the installed huggingface_hub (``hf`` or ``huggingface-cli``)."""
    major = (installed_version("huggingface_hub") or "1").split(".")[0]
    return "huggingface-cli download" if major == "0" else "hf download"


def looks_like_hub_id(source: str) -> bool:
    """``owner/name`` that is not an explicitly local path."""
    return bool(_HUB_ID.match(source)) and not source.startswith((".", "/", "~"))


def resolve_source(source: str | None, layout: Layout = Layout(), revision: str | None = None,
                   allow_network: bool = True) -> ResolvedSource | NotFound:
    """Find the weights of ``model.source`` (UnsafeWeightsError: pickles only, not allowed)."""
    if not source:
        return NotFound("model.source is empty")
    path = Path(os.path.expanduser(str(source)))
    if path.exists():
        return _local(path, layout, "local")
    if not looks_like_hub_id(str(source)):
        return NotFound(f"the local path {path} does not exist")
    return _from_hub(str(source), layout, revision, allow_network)


def pickle_refused(path: Path) -> UnsafeWeightsError:
    """The refusal of a pickle checkpoint read without ``model.allow_pickle=true``."""
    return UnsafeWeightsError(
        f"{path} is a pickle checkpoint ({path.suffix or 'pickle files'}): unpickling can run code "
        "stored in the file, so ascendbench reads only safetensors by default. Convert it once "
        "(`python -c \"import torch; from safetensors.torch import save_file; save_file("
        "torch.load('in.bin', weights_only=True), 'out.safetensors')\"`) and point model.source at "
        "the result, or, if you trust where it came from, set `model.allow_pickle=true` (it is "
        "then read with torch.load(weights_only=True)).")


def _file(path: Path, layout: Layout, origin: str) -> ResolvedSource | NotFound:
    if path.suffix in PICKLE_SUFFIXES:
        if not layout.allow_pickle:
            raise pickle_refused(path)
        return ResolvedSource("file", path.resolve(), f"{origin} (pickle, model.allow_pickle=true)",
                              (path.resolve(),), pickle=True)
    if path.suffix != ".safetensors":
        return NotFound(f"{path} is not a .safetensors file (only safetensors weights are read)")
    return ResolvedSource("file", path.resolve(), origin, (path.resolve(),))


def _local(path: Path, layout: Layout, origin: str) -> ResolvedSource | NotFound:
    if not path.is_file() and not path.is_dir():
        raise WeightsLoadError(
            f"model.source={path} is not a regular file or a directory (a FIFO, device or socket), "
            "so no weights can be read from it: point model.source at a .safetensors file or a "
            "model directory.")
    if path.is_file():
        return _file(path, layout, f"{origin} file")
    root = path / layout.subfolder if layout.subfolder else path
    if layout.filename and (root / layout.filename).is_file():
        return _file(root / layout.filename, layout, f"{origin} file in {path}")
    marker = "model_index.json" if layout.pipeline else "config.json"
    files = tuple(sorted(root.glob("**/*.safetensors" if layout.pipeline else "*.safetensors")))
    irregular = [p for p in files if not p.is_file()]
    if irregular:  # a FIFO or device would block the digest (and the dry run) forever
        raise WeightsLoadError(
            f"{irregular[0]} is not a regular file (a FIFO, device, socket or directory), so it "
            "cannot be read as weights: replace it with the .safetensors file itself, or point "
            "model.source at another directory (model.weights=random runs without weights).")
    pickles = tuple(sorted(p for p in root.glob("*") if p.suffix in PICKLE_SUFFIXES))
    if not (root / marker).is_file() or not (files or pickles):
        wanted = f"{layout.filename} or " if layout.filename else ""
        return NotFound(f"{root} holds neither {wanted}a {marker} with *.safetensors weights")
    if files:
        return ResolvedSource("dir", path.resolve(), f"{origin} directory", files)
    if not layout.allow_pickle:
        raise pickle_refused(pickles[0])
    return ResolvedSource("dir", path.resolve(), f"{origin} directory (pickle, "
                          "model.allow_pickle=true)", pickles, pickle=True)


def _from_hub(repo_id: str, layout: Layout, revision: str | None,
              allow_network: bool) -> ResolvedSource | NotFound:
    from huggingface_hub import snapshot_download  # deferred: only for hub ids

    prefix = f"{layout.subfolder}/" if layout.subfolder else ""
    patterns = [layout.filename] if layout.filename else [
        "*.json", "*.safetensors", *(_PIPELINE_FILES if layout.pipeline else ()),
        *(f"*{s}" for s in PICKLE_SUFFIXES if layout.allow_pickle)]
    attempts = [True] if hub_offline() or not allow_network else [True, False]
    reasons = []
    for local_only in attempts:
        origin = f"hub {repo_id} ({'local cache' if local_only else 'downloaded'})"
        try:
            snapshot = snapshot_download(repo_id, revision=revision, local_files_only=local_only,
                                         allow_patterns=[prefix + p for p in patterns])
        except Exception as exc:  # huggingface_hub raises many unrelated types for "not there"
            first_line = (str(exc).strip().splitlines() or [""])[0]
            reasons.append("not in the local hub cache" if local_only else "hub not reachable or "
                           f"repo not found ({type(exc).__name__}: {first_line[:120]})")
            continue
        found = _local(Path(snapshot), layout, origin)
        if isinstance(found, ResolvedSource):
            return ResolvedSource(found.kind, found.path, origin, found.files, found.pickle)
        reasons.append(found.reason)
    mode = ("offline (HF_HUB_OFFLINE=1), nothing cached" if hub_offline() else
            "not in the local cache (network not tried)" if not allow_network else
            "cache and hub both failed")
    return NotFound(f"hub id {repo_id!r}: {mode}; " + " | ".join(reasons))


def files_digests(files: tuple[Path, ...]) -> tuple[str, list[str], list[int]]:
    """``(digest, sha256sum lines, sizes)`` in one read of ``files`` (sorted)."""
    digest, lines, sizes = hashlib.sha256(), [], []
    root = Path(os.path.commonpath([p.parent for p in files])) if files else Path()
    for path in sorted(files):
        digest.update(path.name.encode())
        own, size = hashlib.sha256(), 0
        with os.fdopen(open_regular(path), "rb") as handle:  # a FIFO is refused, never waited on
            while block := handle.read(1 << 24):
                digest.update(block)
                own.update(block)
                size += len(block)
        lines.append(f"{own.hexdigest()}  {path.relative_to(root)}")
        sizes.append(size)
    return "sha256:" + digest.hexdigest(), lines, sizes


def files_digest(files: tuple[Path, ...]) -> str:
    """SHA256 over the names and bytes of ``files`` (sorted), as ``sha256:<hex>``."""
    return files_digests(files)[0]


def file_sha256(path: Path) -> str:
    """The SHA256 hex digest of one file's bytes (what ``sha256sum`` prints)."""
    return files_digests((Path(path),))[1][0].split()[0]


def check_digest(expected: str | None, weights: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``model.expect_digest``; facts for ``weights`` (WeightsDigestError if it differs)."""
    if expected is None:
        return {}
    wanted, actual = str(expected).strip().lower(), str(weights.get("digest") or "")
    if weights.get("kind") != "loaded":
        raise WeightsDigestError(
            f"model.expect_digest={expected} is set but no weights were loaded "
            f"({weights.get('kind')}: {weights.get('reason')}). Point model.source at the "
            "checkpoint with that digest and set `model.weights=required`, or drop the check with "
            "`model.expect_digest=null`.")
    if wanted == actual:
        return {"expected_digest": wanted, "digest_check": "match: weights.digest"}
    files, source = list(weights.get("files") or []), Path(str(weights.get("source")))
    path = source if source.is_file() else source / files[0] if len(files) == 1 else None
    plain = file_sha256(path) if _HEX.match(wanted) and path and path.is_file() else None
    if plain is not None and wanted == plain:
        return {"expected_digest": wanted, "digest_check": f"match: sha256sum of {path.name}"}
    found = actual + (f" (sha256sum of {path.name}: {plain})" if plain else "")
    raise WeightsDigestError(
        f"model.expect_digest={expected} does not match the weights loaded from "
        f"{weights.get('source')}: their digest is {found}. The files changed, are incomplete, or "
        f"are not the checkpoint expected: fetch it again (e.g. `{hub_download()} <id> "
        "--local-dir <dir>`) and compare with `sha256sum`; if these weights are the ones you want, "
        f"set `model.expect_digest={actual}`, or `model.expect_digest=null` to skip the check.")
