"""The on-disk cache of references: one directory per key, written atomically, verified on read, guarded by a lock.

::

    <cache_dir>/<key>.lock                      held while a job computes the reference of <key>
    <cache_dir>/<key>.owner.json                who holds that lock: pid, host, since when, job dir
    <cache_dir>/<key>/outputs.safetensors       the reference outputs, in the reference precision
    <cache_dir>/<key>/meta.json                 key material, precision, timings, process, and the SHA256,
                                                size and tensor shapes of every file of the entry
    <cache_dir>/<key>/layers-<spec>.safetensors layer outputs for one compare.layers pattern list
    <cache_dir>/<key>/modules-all.json          per-module statistics (compare.layers=all)
    <cache_dir>/<key>/request-<pid>.json        left by older versions (requests now go over stdin); cleaned

A reference is complete when ``meta.json`` and ``outputs.safetensors`` exist; every file is written to a
temporary name and renamed into place, so a killed job never leaves a half-written entry behind. Nothing is
trusted on read: :meth:`BaselineStore.read_meta`, :meth:`~BaselineStore.read_outputs` and
:meth:`~BaselineStore.read_layers` check each file against the digest in ``meta.json`` and raise
:class:`DamagedEntry` (naming the file and what is wrong) for anything damaged, replaced or written by an
older ascendbench without digests; the caller recomputes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch
from filelock import FileLock, Timeout
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ascendbench.baseline.lockinfo import (  # noqa: F401  (LockClock, LockWait, describe_holder: read from here too)
    REQUEST_GLOB,
    LockClock,
    LockWait,
    describe_holder,
    lock_owner,
    lock_timeout,
    pid_alive,
    request_host,
    request_pid,
)
from ascendbench.errors import BaselineError
from ascendbench.fileio import atomic_path, write_atomic

log = logging.getLogger(__name__)

OUTPUTS = "outputs.safetensors"
META = "meta.json"
MODULES = "modules-all.json"
DIGESTS = "digests"  # meta.json: file name -> {"sha256", "bytes"}
SHAPES = "outputs"  # meta.json: output name -> {"shape", "dtype"}
REQUIRED_META = ("key", "precision", DIGESTS, SHAPES)


class DamagedEntry(Exception):
    """A cache file that cannot be trusted: missing, unreadable, or not what ``meta.json`` recorded.

    Attributes:
        path: the bad file.
        why: what is wrong with it, in words.
    """

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = Path(path), why


def spec_digest(spec: str | list[str] | None) -> str | None:
    """Short digest naming the layer file of a ``compare.layers`` pattern list."""
    if spec is None or spec == "all":
        return None
    return hashlib.sha256(json.dumps(list(spec)).encode()).hexdigest()[:16]


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
        """File holding the captures of ``spec`` (``None`` when no layers are compared)."""
        if spec is None:
            return None
        return self.entry(key) / (MODULES if spec == "all" else f"layers-{spec_digest(spec)}.safetensors")

    # --- cheap checks (no file is read in full) ---------------------------------------------------------------

    def has_outputs(self, key: str) -> bool:
        """Whether ``key`` looks complete: ``meta.json`` parses, records digests, and ``outputs.safetensors`` has
        the recorded size (the full digest check is :meth:`read_outputs`'s)."""
        try:
            meta = self.read_meta(key)
            self._check_size(key, OUTPUTS, meta)
        except (FileNotFoundError, DamagedEntry):
            return False
        return True

    def has_layers(self, key: str, spec: str | list[str] | None) -> bool:
        """Whether the captures of ``spec`` are on disk (always true when no layers are wanted)."""
        path = self.layers_file(key, spec)
        return path is None or path.is_file()

    # --- writing ------------------------------------------------------------------------------------------------

    def write_outputs(self, key: str, outputs: Mapping[str, torch.Tensor], meta: Mapping[str, Any]) -> None:
        """Write the outputs, then ``meta.json`` (the completion mark) with their digest and shapes."""
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in outputs.items()}
        with atomic_path(self.entry(key) / OUTPUTS) as tmp:
            save_file(tensors, str(tmp), metadata={"key": key})
            digest = file_digest(tmp)
        self.write_meta(key, {"key": key, **meta, SHAPES: describe_tensors(tensors), DIGESTS: {OUTPUTS: digest}})

    def write_meta(self, key: str, meta: Mapping[str, Any]) -> None:
        """(Re)write ``meta.json``."""
        text = json.dumps(meta, indent=2, sort_keys=True, default=str)
        write_atomic(self.entry(key) / META, text)

    def write_layers(self, key: str, spec: str | list[str], capture: Any) -> None:
        """Write a capture (tensors in pattern mode, module statistics for ``all``) and add its digest to
        ``meta.json`` (which must exist: the outputs are written first)."""
        path = self.layers_file(key, spec)
        with atomic_path(path) as tmp:
            if spec == "all":
                tmp.write_text(json.dumps({"modules": capture.modules}, default=str))
            else:
                metadata = {"order": json.dumps(capture.order), "dropped": json.dumps(capture.dropped),
                            "spec": json.dumps(list(spec))}
                save_file(capture.tensors, str(tmp), metadata=metadata)
            digest = file_digest(tmp)
        meta = self.read_meta(key)
        self.write_meta(key, {**meta, DIGESTS: {**meta[DIGESTS], path.name: digest}})

    # --- verified reading ---------------------------------------------------------------------------------------

    def read_meta(self, key: str) -> dict[str, Any]:
        """The ``meta.json`` of ``key``, checked to be whole and to belong to ``key``.

        Raises:
            FileNotFoundError: no entry (neither ``meta.json`` nor ``outputs.safetensors``): a plain cache miss.
            DamagedEntry: anything else that is not a complete, current ``meta.json``.
        """
        path = self.entry(key) / META
        if not path.is_file():
            if (self.entry(key) / OUTPUTS).exists():
                raise DamagedEntry(path, f"is missing beside {OUTPUTS} (an interrupted write, or deleted)")
            raise FileNotFoundError(path)
        try:
            meta = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise DamagedEntry(path, f"is not valid JSON ({type(exc).__name__}: {exc})") from exc
        if not isinstance(meta, dict):
            raise DamagedEntry(path, f"holds a {type(meta).__name__}, not an object")
        if DIGESTS not in meta:
            raise DamagedEntry(path, "records no digest of the cached files (written by an older ascendbench, "
                                     "or edited): not trusted")
        missing = [k for k in REQUIRED_META if k not in meta]
        if missing:
            raise DamagedEntry(path, f"lacks the keys {missing}")
        if meta["key"] != key:
            raise DamagedEntry(path, f"belongs to the key {meta['key']!r}, not to its directory's {key!r}")
        return meta

    def _check_size(self, key: str, name: str, meta: Mapping[str, Any]) -> dict[str, Any]:
        path = self.entry(key) / name
        recorded = meta[DIGESTS].get(name) if isinstance(meta.get(DIGESTS), dict) else None
        if not isinstance(recorded, dict) or "sha256" not in recorded:
            raise DamagedEntry(path, f"has no digest in {META} (written by an older ascendbench): not trusted")
        if not path.is_file():
            raise DamagedEntry(path, f"is missing although {META} records it")
        size = path.stat().st_size
        if size != recorded.get("bytes"):
            raise DamagedEntry(path, f"has {size} bytes where {META} records {recorded.get('bytes')} (truncated or "
                                     "replaced)")
        return recorded

    def _verified(self, key: str, name: str, meta: Mapping[str, Any]) -> Path:
        """The path of ``name``, after its size and SHA256 matched ``meta.json``."""
        recorded = self._check_size(key, name, meta)
        path = self.entry(key) / name
        actual = file_digest(path)["sha256"]
        if actual != recorded["sha256"]:
            raise DamagedEntry(path, f"has SHA256 {actual[7:19]}... where {META} records {recorded['sha256'][7:19]}"
                                     "... (its content was replaced or corrupted)")
        return path

    def read_outputs(self, key: str, meta: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """The cached reference outputs, after their names, shapes, dtypes and digest matched ``meta``.

        Raises:
            DamagedEntry: the file is missing, truncated, replaced, or unreadable.
        """
        path = self.entry(key) / OUTPUTS
        expected = meta[SHAPES]
        _check_header(path, expected)
        self._verified(key, OUTPUTS, meta)
        tensors = _load_safetensors(path)
        found = describe_tensors(tensors)
        if found != expected:
            raise DamagedEntry(path, f"holds {_shapes(found)} where {META} records {_shapes(expected)}")
        return tensors

    def read_layers(self, key: str, spec: str | list[str] | None, meta: Mapping[str, Any]) -> Any:
        """``None``, the module statistics list (``all``) or ``{tensors, order, dropped}`` (patterns), after the
        file's digest matched ``meta``.

        Raises:
            FileNotFoundError: this capture was never written (compute it).
            DamagedEntry: the file is unreadable or differs from its digest.
        """
        path = self.layers_file(key, spec)
        if path is None:
            return None
        if not path.is_file():
            raise FileNotFoundError(path)
        self._verified(key, path.name, meta)
        if spec == "all":
            try:
                return json.loads(path.read_text())["modules"]
            except (ValueError, KeyError, TypeError) as exc:
                raise DamagedEntry(path, f"is not a module statistics file ({type(exc).__name__}: {exc})") from exc
        try:
            with safe_open(str(path), framework="pt") as handle:
                metadata = handle.metadata() or {}
            return {"tensors": load_file(str(path)), "order": json.loads(metadata.get("order", "[]")),
                    "dropped": json.loads(metadata.get("dropped", "[]"))}
        except Exception as exc:  # safetensors raises its own error class, or OSError / ValueError
            raise DamagedEntry(path, f"cannot be read ({type(exc).__name__}: {exc})") from exc

    # --- repair -------------------------------------------------------------------------------------------------

    def discard(self, key: str, names: list[str] | None = None) -> list[str]:
        """Remove the named files of an entry (all cached files and leftover temporaries when ``None``); call it
        under the key's lock. Returns the names removed."""
        entry = self.entry(key)
        if not entry.is_dir():
            return []
        doomed = [p for p in entry.iterdir() if p.is_file() and (
            p.name in names if names is not None else not p.name.startswith("request-"))]
        for path in doomed:
            path.unlink(missing_ok=True)
        return [p.name for p in doomed]

    def clean_stale_requests(self) -> list[Path]:
        """Remove ``request-<pid>.json`` files of this host whose job process is gone (a job killed with
        SIGKILL cannot remove its own). Returns the files removed."""
        removed = []
        for path in self.root.glob(f"*/{REQUEST_GLOB}"):
            pid = request_pid(path)
            if pid is None or pid_alive(pid) or request_host(path) not in (None, socket.gethostname()):
                continue
            path.unlink(missing_ok=True)
            removed.append(path)
            log.info("removed the stale baseline request %s (its job, pid %d, is gone)", path, pid)
        return removed

    # --- the lock -----------------------------------------------------------------------------------------------

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
    def lock(self, key: str, timeout_s: float, owner: Mapping[str, Any] | None = None) -> Iterator[LockWait]:
        """Hold ``<key>.lock`` (a negative ``timeout_s`` waits for ever); yields the :class:`LockWait`.

        While it waits, the job logs who holds the lock at once, then a heartbeat at most every
        ``clock.heartbeat_s``; once it holds it, ``<key>.owner.json`` says who it is (``owner`` added).

        Raises:
            BaselineError: the lock was not obtained within ``timeout_s`` (the message names the holder).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.root / f"{key}.lock"))
        wait = self._acquire(lock, key, float(timeout_s))
        try:
            write_atomic(self.owner_file(key), json.dumps(lock_owner(owner), sort_keys=True))
            yield wait
        finally:
            self.owner_file(key).unlink(missing_ok=True)
            lock.release()

    def _acquire(self, lock: FileLock, key: str, timeout_s: float) -> LockWait:
        clock = self.clock
        start = last = clock.now()
        wait = LockWait()
        while True:
            try:
                lock.acquire(timeout=clock.poll_s if timeout_s < 0 else min(clock.poll_s, timeout_s))
                wait.seconds = clock.now() - start
                return wait
            except Timeout:
                now = clock.now()
            first = wait.holder is None
            wait.holder = self.holder(key) or {}
            if 0 <= timeout_s <= now - start:
                raise BaselineError(lock_timeout(self.root / f"{key}.lock", timeout_s, wait.holder))
            if first or now - last >= clock.heartbeat_s:
                last = now
                log.info("waiting for the baseline lock %s, held by %s; waited %.0f s of baseline.lock_timeout_s="
                         "%g s", self.root / f"{key}.lock", describe_holder(wait.holder), now - start, timeout_s)


def _shapes(described: Mapping[str, Mapping[str, Any]]) -> str:
    return ", ".join(f"{k} {v.get('dtype')} {v.get('shape')}" for k, v in described.items()) or "nothing"


def _check_header(path: Path, expected: Mapping[str, Mapping[str, Any]]) -> None:
    """The names, dtypes and shapes in the safetensors header equal ``expected`` (reads the header only)."""
    if not path.is_file():
        raise DamagedEntry(path, f"is missing although {META} records it")
    try:
        with safe_open(str(path), framework="pt") as handle:
            found = {k: {"shape": list(handle.get_slice(k).get_shape()),
                         "dtype": _dtype_name(handle.get_slice(k).get_dtype())} for k in sorted(handle.keys())}
    except Exception as exc:  # safetensors' own error class, OSError, ValueError
        raise DamagedEntry(path, f"cannot be read as safetensors ({type(exc).__name__}: {exc})") from exc
    if found != expected:
        raise DamagedEntry(path, f"holds {_shapes(found)} where {META} records {_shapes(expected)}")


_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                       "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def _dtype_name(code: str) -> str:
    return _SAFETENSORS_DTYPES.get(code, code)


def _load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except Exception as exc:  # safetensors' own error class, OSError
        raise DamagedEntry(path, f"cannot be read as safetensors ({type(exc).__name__}: {exc})") from exc
