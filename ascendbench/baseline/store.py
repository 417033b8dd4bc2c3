"""The on-disk reference cache (docs/accuracy.md): a directory per key, checked on read."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch
from filelock import FileLock, Timeout
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ascendbench.errors import BaselineError, ConfigError
from ascendbench.fileio import atomic_path, write_atomic

log = logging.getLogger(__name__)

OUTPUTS = "outputs.safetensors"
META = "meta.json"
MODULES = "modules-all.json"
DIGESTS = "digests"  # meta.json: file name -> {"sha256", "bytes"}
SHAPES = "outputs"  # meta.json: output name -> {"shape", "dtype"}
REQUIRED_META = ("key", "precision", DIGESTS, SHAPES)
SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
                      "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
                      "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


class DamagedEntry(Exception):
    """A cache file that cannot be trusted: ``path`` and ``why``, in words."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = Path(path), why


def file_digest(path: Path) -> dict[str, Any]:
    """``{"sha256": "sha256:<hex>", "bytes": size}`` of a file, read in chunks."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            sha.update(chunk)
    return {"sha256": "sha256:" + sha.hexdigest(), "bytes": Path(path).stat().st_size}


def describe_tensors(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Name -> ``{"shape", "dtype"}``, as ``meta.json`` records the outputs."""
    return {k: {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
            for k, v in sorted(tensors.items())}


def header_tensors(path: Path | str) -> dict[str, torch.Tensor]:
    """Meta tensors of a safetensors file's shapes and dtypes (its header only is read)."""
    with safe_open(str(path), framework="pt") as handle:
        slices = {k: handle.get_slice(k) for k in sorted(handle.keys())}
        return {k: torch.empty(s.get_shape(), dtype=SAFETENSORS_DTYPES[s.get_dtype()],
                               device="meta") for k, s in slices.items()}


def _shapes(described: Mapping[str, Mapping[str, Any]]) -> str:
    text = ", ".join(f"{k} {v.get('dtype')} {v.get('shape')}" for k, v in described.items())
    return text or "nothing"


class Baseline(dict):
    """Reference outputs (name -> tensor), ``info`` (the record's ``baseline``) and ``layers``."""

    def __init__(self, outputs: Mapping[str, torch.Tensor], info: dict[str, Any],
                 layers: Any = None) -> None:
        super().__init__(outputs)
        self.info, self.layers = info, layers


@dataclass
class LockClock:
    """The lock wait's clock, poll period and "still waiting" period (faked in tests)."""

    now: Callable[[], float] = time.monotonic
    poll_s: float = 1.0
    heartbeat_s: float = 15.0


@dataclass
class LockWait:
    """How a job got the lock: seconds waited, and who held it meanwhile (``None``: nobody)."""

    seconds: float = 0.0
    holder: dict[str, Any] | None = None


def describe_holder(holder: Mapping[str, Any] | None) -> str:
    """``pid 123 on host h since 2026-...Z (for 75 s), job /path`` or why the holder is unknown."""
    if not holder or "pid" not in holder:
        return "an unknown process (no owner file: an older ascendbench, or it is just starting)"
    text = f"pid {holder['pid']} on host {holder.get('host', '?')} since {holder.get('since', '?')}"
    if isinstance(holder.get("since_epoch"), (int, float)):
        text += f" (for {max(0.0, time.time() - holder['since_epoch']):.0f} s)"
    return text + (f", job {holder['job']}" if holder.get("job") else "")


@dataclass
class BaselineStore:
    """Reads and writes cached references under ``root`` (``baseline.cache_dir``)."""

    root: Path
    clock: LockClock = field(default_factory=LockClock)

    def __post_init__(self) -> None:
        self.root = Path(os.path.expanduser(str(self.root)))

    def entry(self, key: str) -> Path:
        """Directory of one key."""
        return self.root / key

    def layers_file(self, key: str, spec: str | list[str] | None) -> Path | None:
        """File of the captures of ``spec`` (``None`` when no layers are compared)."""
        if spec is None:
            return None
        if spec == "all":
            return self.entry(key) / MODULES
        digest = hashlib.sha256(json.dumps(list(spec)).encode()).hexdigest()[:16]
        return self.entry(key) / f"layers-{digest}.safetensors"

    def has_outputs(self, key: str) -> bool:
        """Whether ``key`` looks complete (``meta.json`` whole, outputs of the recorded size)."""
        try:
            self._check_size(key, OUTPUTS, self.read_meta(key))
        except (FileNotFoundError, DamagedEntry):
            return False
        return True

    def has_layers(self, key: str, spec: str | list[str] | None) -> bool:
        """Whether the captures of ``spec`` are on disk (always true when no layers are wanted)."""
        path = self.layers_file(key, spec)
        return path is None or path.is_file()

    def write_outputs(self, key: str, outputs: Mapping[str, torch.Tensor],
                      meta: Mapping[str, Any]) -> None:
        """The outputs, then ``meta.json`` (the completion mark) with their digest and shapes."""
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in outputs.items()}
        with atomic_path(self.entry(key) / OUTPUTS) as tmp:
            save_file(tensors, str(tmp), metadata={"key": key})
            digest = file_digest(tmp)
        self.write_meta(key, {"key": key, **meta, SHAPES: describe_tensors(tensors),
                              DIGESTS: {OUTPUTS: digest}})

    def write_meta(self, key: str, meta: Mapping[str, Any]) -> None:
        """(Re)write ``meta.json``."""
        text = json.dumps(meta, indent=2, sort_keys=True, default=str)
        write_atomic(self.entry(key) / META, text)

    def write_layers(self, key: str, spec: str | list[str], capture: Any) -> None:
        """A layer capture, its digest added to ``meta.json`` (written with the outputs first)."""
        path = self.layers_file(key, spec)
        with atomic_path(path) as tmp:
            if spec == "all":
                tmp.write_text(json.dumps({"modules": capture.modules}, default=str))
            else:
                metadata = {"order": json.dumps(capture.order), "spec": json.dumps(list(spec)),
                            "dropped": json.dumps(capture.dropped)}
                save_file(capture.tensors, str(tmp), metadata=metadata)
            digest = file_digest(tmp)
        meta = self.read_meta(key)
        self.write_meta(key, {**meta, DIGESTS: {**meta[DIGESTS], path.name: digest}})

    def read_meta(self, key: str) -> dict[str, Any]:
        """``key``'s whole ``meta.json``; FileNotFoundError: a plain miss, else DamagedEntry."""
        path = self.entry(key) / META
        if not path.is_file():
            if (self.entry(key) / OUTPUTS).exists():
                why = f"is missing beside {OUTPUTS} (an interrupted write, or deleted)"
                raise DamagedEntry(path, why)
            raise FileNotFoundError(path)
        try:
            meta = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise DamagedEntry(path, f"is not valid JSON ({type(exc).__name__}: {exc})") from exc
        if not isinstance(meta, dict):
            raise DamagedEntry(path, f"holds a {type(meta).__name__}, not an object")
        if DIGESTS not in meta:
            raise DamagedEntry(path, "records no digest of the cached files (written by an older "
                                     "ascendbench, or edited): not trusted")
        missing = [k for k in REQUIRED_META if k not in meta]
        if missing:
            raise DamagedEntry(path, f"lacks the keys {missing}")
        if meta["key"] != key:
            why = f"belongs to the key {meta['key']!r}, not to its directory's {key!r}"
            raise DamagedEntry(path, why)
        return meta

    def _check_size(self, key: str, name: str, meta: Mapping[str, Any]) -> dict[str, Any]:
        path = self.entry(key) / name
        recorded = meta[DIGESTS].get(name) if isinstance(meta.get(DIGESTS), dict) else None
        if not isinstance(recorded, dict) or "sha256" not in recorded:
            raise DamagedEntry(path, f"has no digest in {META} (written by an older ascendbench): "
                                     "not trusted")
        if not path.is_file():
            raise DamagedEntry(path, f"is missing although {META} records it")
        size = path.stat().st_size
        if size != recorded.get("bytes"):
            why = f"has {size} bytes where {META} records {recorded.get('bytes')}"
            raise DamagedEntry(path, f"{why} (truncated or replaced)")
        return recorded

    def _verify(self, key: str, name: str, meta: Mapping[str, Any]) -> Path:
        recorded = self._check_size(key, name, meta)
        path = self.entry(key) / name
        actual = file_digest(path)["sha256"]
        if actual != recorded["sha256"]:
            why = f"has SHA256 {actual[7:19]}... where {META} records {recorded['sha256'][7:19]}..."
            raise DamagedEntry(path, f"{why} (its content was replaced or corrupted)")
        return path

    def read_outputs(self, key: str, meta: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """The cached outputs, after their names, shapes, dtypes (header) and digest matched."""
        path = self.entry(key) / OUTPUTS
        if not path.is_file():
            raise DamagedEntry(path, f"is missing although {META} records it")
        try:
            found = describe_tensors(header_tensors(path))
        except Exception as exc:  # safetensors' own error class, OSError, ValueError, KeyError
            why = f"cannot be read as safetensors ({type(exc).__name__}: {exc})"
            raise DamagedEntry(path, why) from exc
        if found != meta[SHAPES]:
            why = f"holds {_shapes(found)} where {META} records {_shapes(meta[SHAPES])}"
            raise DamagedEntry(path, why)
        return load_file(str(self._verify(key, OUTPUTS, meta)))

    def read_layers(self, key: str, spec: str | list[str] | None, meta: Mapping[str, Any]) -> Any:
        """``None``, module statistics (``all``) or ``{tensors, order, dropped}``, verified."""
        path = self.layers_file(key, spec)
        if path is None:
            return None
        if not path.is_file():
            raise FileNotFoundError(path)
        self._verify(key, path.name, meta)
        try:
            if spec == "all":
                return json.loads(path.read_text())["modules"]
            with safe_open(str(path), framework="pt") as handle:
                metadata = handle.metadata() or {}
            return {"tensors": load_file(str(path)),
                    "order": json.loads(metadata.get("order", "[]")),
                    "dropped": json.loads(metadata.get("dropped", "[]"))}
        except Exception as exc:  # safetensors' own error class, OSError, ValueError, KeyError
            raise DamagedEntry(path, f"cannot be read ({type(exc).__name__}: {exc})") from exc

    def discard(self, key: str, names: list[str] | None = None) -> None:
        """Remove the named files of an entry (every file when ``None``), under the key's lock."""
        entry = self.entry(key)
        for path in entry.iterdir() if entry.is_dir() else []:
            if path.is_file() and (names is None or path.name in names):
                path.unlink(missing_ok=True)

    def owner_file(self, key: str) -> Path:
        """Where the holder of ``<key>.lock`` says who it is."""
        return self.root / f"{key}.owner.json"

    def holder(self, key: str) -> dict[str, Any] | None:
        """What the holder of the lock wrote about itself (``None``: unknown)."""
        try:
            found = json.loads(self.owner_file(key).read_text())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    @contextmanager
    def lock(self, key: str, timeout_s: float,
             owner: Mapping[str, Any] | None = None) -> Iterator[LockWait]:
        """Hold ``<key>.lock`` (``timeout_s`` < 0: for ever), naming the holder in a file."""
        lock = FileLock(str(self.root / f"{key}.lock"))
        try:  # created here: a place that cannot hold it would read as a lock held for ever
            self.root.mkdir(parents=True, exist_ok=True)
            os.close(os.open(lock.lock_file, os.O_RDWR | os.O_CREAT, 0o666))
        except OSError as exc:
            raise ConfigError(f"baseline.cache_dir={self.root} cannot be written ({exc}), and a "
                              "reference not in it is computed under a lock file there. Point "
                              "baseline.cache_dir at a writable directory.") from exc
        wait = self._acquire(lock, key, float(timeout_s))
        try:
            now = time.time()
            me = {"pid": os.getpid(), "host": socket.gethostname(), "since_epoch": now,
                  "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), **(owner or {})}
            write_atomic(self.owner_file(key), json.dumps(me, sort_keys=True))
            yield wait
        finally:
            self.owner_file(key).unlink(missing_ok=True)
            lock.release()

    def _acquire(self, lock: FileLock, key: str, timeout_s: float) -> LockWait:
        clock, path = self.clock, self.root / f"{key}.lock"
        start = last = clock.now()
        wait, poll_s = LockWait(), clock.poll_s if timeout_s < 0 else min(clock.poll_s, timeout_s)
        while True:
            try:
                lock.acquire(timeout=poll_s)
                wait.seconds = clock.now() - start
                return wait
            except Timeout:
                now = clock.now()
            first = wait.holder is None
            wait.holder = self.holder(key) or wait.holder or {}  # its file goes before the lock
            if 0 <= timeout_s <= now - start:
                raise BaselineError(
                    f"another job, {describe_holder(wait.holder)}, has held the baseline lock "
                    f"{path} for more than baseline.lock_timeout_s={timeout_s:g} s while computing "
                    "the same reference. Wait for it, raise baseline.lock_timeout_s, or if that "
                    "process is not running any more remove the stale lock file.")
            if first or now - last >= clock.heartbeat_s:
                last = now
                log.info("waiting for the baseline lock %s, held by %s; waited %.0f s of "
                         "baseline.lock_timeout_s=%g s", path, describe_holder(wait.holder),
                         now - start, timeout_s)
