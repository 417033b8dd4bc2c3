"""The on-disk cache of references: one directory per key, written atomically, guarded by a file lock.

::

    <cache_dir>/<key>.lock                      held while a job computes the reference of <key>
    <cache_dir>/<key>/outputs.safetensors       the reference outputs, in the reference precision
    <cache_dir>/<key>/meta.json                 key material, precision, timings, process (written last)
    <cache_dir>/<key>/layers-<spec>.safetensors layer outputs for one compare.layers pattern list
    <cache_dir>/<key>/modules-all.json          per-module statistics (compare.layers=all)

A reference is complete when ``meta.json`` and ``outputs.safetensors`` exist; every file is written to
a temporary name and renamed into place, so a killed job never leaves a half-written entry behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch
from filelock import FileLock, Timeout
from safetensors.torch import load_file, save_file

from ascendbench.errors import BaselineError
from ascendbench.fileio import atomic_path, write_atomic

OUTPUTS = "outputs.safetensors"
META = "meta.json"
MODULES = "modules-all.json"


def spec_digest(spec: str | list[str] | None) -> str | None:
    """Short digest naming the layer file of a ``compare.layers`` pattern list."""
    if spec is None or spec == "all":
        return None
    return hashlib.sha256(json.dumps(list(spec)).encode()).hexdigest()[:16]


class BaselineStore:
    """Reads and writes cached references under ``root`` (``baseline.cache_dir``)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(os.path.expanduser(str(root)))

    def entry(self, key: str) -> Path:
        """Directory of one key."""
        return self.root / key

    def layers_file(self, key: str, spec: str | list[str] | None) -> Path | None:
        """File holding the captures of ``spec`` (``None`` when no layers are compared)."""
        if spec is None:
            return None
        return self.entry(key) / (MODULES if spec == "all" else f"layers-{spec_digest(spec)}.safetensors")

    def has_outputs(self, key: str) -> bool:
        """Whether the reference outputs of ``key`` are complete on disk."""
        return (self.entry(key) / META).is_file() and (self.entry(key) / OUTPUTS).is_file()

    def has_layers(self, key: str, spec: str | list[str] | None) -> bool:
        """Whether the captures of ``spec`` are on disk (always true when no layers are wanted)."""
        path = self.layers_file(key, spec)
        return path is None or path.is_file()

    def write_outputs(self, key: str, outputs: Mapping[str, torch.Tensor], meta: Mapping[str, Any]) -> None:
        """Write the outputs, then ``meta.json`` (the completion mark)."""
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in outputs.items()}
        with atomic_path(self.entry(key) / OUTPUTS) as tmp:
            save_file(tensors, str(tmp), metadata={"key": key})
        self.write_meta(key, meta)

    def write_meta(self, key: str, meta: Mapping[str, Any]) -> None:
        """(Re)write ``meta.json``."""
        text = json.dumps(meta, indent=2, sort_keys=True, default=str)
        write_atomic(self.entry(key) / META, text)

    def write_layers(self, key: str, spec: str | list[str], capture: Any) -> None:
        """Write a capture: tensors (pattern mode) or module statistics (``all``)."""
        path = self.layers_file(key, spec)
        if spec == "all":
            text = json.dumps({"modules": capture.modules}, default=str)
            write_atomic(path, text)
            return
        metadata = {"order": json.dumps(capture.order), "dropped": json.dumps(capture.dropped),
                    "spec": json.dumps(list(spec))}
        with atomic_path(path) as tmp:
            save_file(capture.tensors, str(tmp), metadata=metadata)

    def read_meta(self, key: str) -> dict[str, Any]:
        """The ``meta.json`` of ``key``."""
        return json.loads((self.entry(key) / META).read_text())

    def read_outputs(self, key: str) -> dict[str, torch.Tensor]:
        """The cached reference outputs."""
        return load_file(str(self.entry(key) / OUTPUTS))

    def read_layers(self, key: str, spec: str | list[str] | None) -> Any:
        """``None``, the module statistics list (``all``) or ``{tensors, order, dropped}`` (patterns)."""
        path = self.layers_file(key, spec)
        if path is None:
            return None
        if spec == "all":
            return json.loads(path.read_text())["modules"]
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
        return {"tensors": load_file(str(path)), "order": json.loads(metadata.get("order", "[]")),
                "dropped": json.loads(metadata.get("dropped", "[]"))}

    @contextmanager
    def lock(self, key: str, timeout_s: float) -> Iterator[float]:
        """Hold ``<key>.lock``; yields the seconds spent waiting for another job.

        Raises:
            BaselineError: the lock was not obtained within ``timeout_s``.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{key}.lock"
        start = time.perf_counter()
        lock = FileLock(str(path), timeout=float(timeout_s))
        try:
            lock.acquire()
        except Timeout as exc:
            raise BaselineError(
                f"another job has held the baseline lock {path} for more than baseline.lock_timeout_s="
                f"{timeout_s:g} s while computing the same reference. Wait for it, raise "
                "baseline.lock_timeout_s, or if no ascendbench job is running remove the stale lock file."
            ) from exc
        try:
            yield time.perf_counter() - start
        finally:
            lock.release()
