"""A job's CPU reference: from the cache (verified, else recomputed) or computed under a lock."""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf
from safetensors import safe_open
from safetensors.torch import load_file

from ascendbench.baseline.compute import UNCACHED_WHY, run_reference, write_entry
from ascendbench.baseline.key import cache_key, key_material
from ascendbench.baseline.memory import reference_memory
from ascendbench.baseline.process import CHILD_LOG, run_child
from ascendbench.baseline.store import META, Baseline, BaselineStore, DamagedEntry
from ascendbench.compare.select import normalize_spec, select_modules
from ascendbench.errors import BaselineError, ConfigError
from ascendbench.precision import REFERENCE_DTYPES, dtype_name

log = logging.getLogger(__name__)
UNCACHED = "reference-uncached.safetensors"  # in the job dir: a reference the cache could not keep


@dataclass
class ReferenceQuery:
    """A job's reference: the record's ``weights``, ``inputs_info``, the float32 ``module``."""

    cfg: DictConfig
    task: Any
    inputs: Mapping[str, torch.Tensor]
    precision: torch.dtype
    weights: Mapping[str, Any]
    inputs_info: Mapping[str, Any]
    module: torch.nn.Module | None = None
    log_dir: Path = field(default_factory=Path)

    @cached_property
    def material(self) -> dict[str, Any]:
        """What the cache key is the hash of."""
        return key_material(self.cfg, self.weights, self.inputs_info, self.precision)

    @cached_property
    def key(self) -> str:
        """The content hash naming the reference in the requested precision."""
        return cache_key(self.material)

    @cached_property
    def candidates(self) -> list[tuple[str, str]]:
        """``(precision, key)`` of every entry that may serve, highest precision first."""
        own = (dtype_name(self.precision), self.key)
        if self.precision not in REFERENCE_DTYPES.values():
            return [own]
        names = [dtype_name(d) for d in sorted(REFERENCE_DTYPES.values(), key=lambda d: -d.itemsize)
                 if d.itemsize > self.precision.itemsize]
        return [(n, cache_key({**self.material, "precision": n})) for n in names] + [own]

    @cached_property
    def store(self) -> BaselineStore:
        """The cache under ``baseline.cache_dir``."""
        return BaselineStore(self.cfg.baseline.cache_dir)

    @cached_property
    def spec(self) -> Any:
        """The normalised ``compare.layers`` (``None``, ``"all"`` or a pattern list)."""
        return normalize_spec(self.cfg.compare.get("layers"))

    @property
    def use_cache(self) -> bool:
        """``baseline.cache``: read the cache (results are written either way)."""
        return bool(self.cfg.baseline.get("cache", True))

    def cached(self) -> bool:
        """An entry looks able to serve (outputs and layer captures; digests checked on read)."""
        store = self.store
        return self.use_cache and any(store.has_outputs(k) and store.has_layers(k, self.spec)
                                      for _, k in self.candidates)


@dataclass
class _Entry:
    """One cache entry once verified; ``problem``: the first file that did not verify."""

    key: str
    precision: str
    meta: dict[str, Any] | None = None
    outputs: dict[str, torch.Tensor] | None = None
    layers: Any = None
    has_layers: bool = False
    problem: DamagedEntry | None = None

    @property
    def complete(self) -> bool:
        """Outputs and the wanted layer captures are all there and verified."""
        return self.outputs is not None and self.has_layers and self.problem is None


def _read_entry(store: BaselineStore, key: str, precision: str, spec: Any) -> _Entry:
    """Read and verify one entry; a plain miss leaves fields empty, damage sets ``problem``."""
    entry, path = _Entry(key, precision), store.entry(key) / META
    try:
        meta = store.read_meta(key)
        if meta.get("precision") != precision:
            why = f"records precision {meta.get('precision')!r} for a {precision} key"
            raise DamagedEntry(path, why)
        if meta.get("material") is not None and cache_key(meta["material"]) != key:
            raise DamagedEntry(path, "records key material that does not hash to its key (edited)")
        entry.meta = meta
        entry.outputs = store.read_outputs(key, meta)
        entry.layers = store.read_layers(key, spec, meta)
        entry.has_layers = True
    except FileNotFoundError:  # no entry, or this layer capture was never computed
        pass
    except DamagedEntry as exc:
        entry.problem = exc
    return entry


def _reject(info: dict[str, Any], problem: DamagedEntry, action: str) -> None:
    rejected = info.setdefault("rejected", [])
    if any(r["file"] == str(problem.path) and r["why"] == problem.why for r in rejected):
        return
    rejected.append({"file": str(problem.path), "why": problem.why, "action": action})
    log.warning("baseline cache entry rejected: %s %s; %s", problem.path, problem.why, action)


def _served(entry: _Entry, query: ReferenceQuery, info: dict[str, Any], start: float) -> Baseline:
    meta = entry.meta or {}
    process = meta.get("process") or {}
    path = query.store.entry(entry.key)
    info.update(cache_key=entry.key, path=str(path), precision=meta["precision"],
                seconds=meta.get("seconds"), process=process.get("kind"),
                torch_npu_blocked=process.get("torch_npu_blocked"),
                computed_at=meta.get("created_at"), load_s=time.perf_counter() - start)
    if entry.key != query.key:
        info["requested_key"] = query.key
        log.info("CPU reference: the cached %s reference serves this %s request (%s)",
                 entry.precision, info["requested_precision"], path)
    return Baseline(entry.outputs, info, entry.layers)


def _lookup(query: ReferenceQuery, info: dict[str, Any]) -> tuple[Baseline | None, _Entry]:
    """The first candidate entry verified whole, and the requested key's own (no cache: none)."""
    own = _Entry(query.key, dtype_name(query.precision))
    for precision, key in query.candidates if query.use_cache else ():
        start = time.perf_counter()
        entry = _read_entry(query.store, key, precision, query.spec)
        if key == query.key:
            own = entry
        elif entry.problem is not None:
            _reject(info, entry.problem, f"not used; the {own.precision} reference is used instead")
        if entry.complete:
            return _served(entry, query, info, start), own
    return None, own


def _request(query: ReferenceQuery, layers: Any, want_outputs: bool) -> dict[str, Any]:
    cfg = query.cfg
    config = {"model": OmegaConf.to_container(cfg.model, resolve=True),
              "preset": OmegaConf.to_container(cfg.preset, resolve=True), "seed": int(cfg.seed)}
    capture_bytes = int(float(cfg.compare.get("max_capture_mb", 4096)) * (1 << 20))
    return {"config": config, "key": query.key, "material": dict(query.material),
            "cache_dir": str(query.store.root), "weights": dict(query.weights),
            "inputs": {k: dict(v) for k, v in query.inputs_info.items()},
            "precision": dtype_name(query.precision), "layers": layers,
            "want_outputs": want_outputs, "max_capture_bytes": capture_bytes,
            "uncached": str(Path(query.log_dir) / UNCACHED),
            "owner": {"pid": os.getpid(), "host": socket.gethostname()}}


def _run_in_process(request: Mapping[str, Any], query: ReferenceQuery) -> dict[str, Any]:
    if "torch_npu" in sys.modules or importlib.util.find_spec("torch_npu") is not None:
        raise ConfigError("baseline.process=in-process is refused here: torch_npu is importable, "
                          "and diffusers then runs NPU kernels even for CPU tensors, which would "
                          "contaminate the reference. Use baseline.process=child.")
    start, module = time.perf_counter(), query.module
    try:
        run = run_reference(module, query.task, query.inputs, query.precision,
                            layers=request["layers"],
                            max_capture_bytes=request["max_capture_bytes"])
    finally:
        module.to(dtype=torch.float32)
    process = {"kind": "in-process", "pid": os.getpid(), "torch_npu_blocked": False}
    write_entry(query.store, request, run, {"process": process})
    return {"wall_s": time.perf_counter() - start}


def _estimate_bytes(query: ReferenceQuery) -> float | None:
    if query.module is None:
        return None
    try:
        return reference_memory(query.module, query.task, query.inputs, query.precision).total
    except Exception as exc:  # an estimate must not hide the failure it explains
        log.debug("no memory estimate for the failure message: %s", exc)
        return None


def _uncached(path: Path, info: dict[str, Any], precision: str) -> Baseline:
    """The reference the cache could not keep, read once from the job dir: why in ``not_cached``."""
    with safe_open(str(path), framework="pt") as handle:
        why = (handle.metadata() or {}).get(UNCACHED_WHY)
    outputs = load_file(str(path))
    path.unlink()
    info.update(precision=precision, not_cached=f"computed, not cached, for this job only: {why}")
    log.warning("CPU reference %s", info["not_cached"])
    return Baseline(outputs, info)


def _compute(query: ReferenceQuery, own: _Entry, info: dict[str, Any]) -> Baseline:
    """Under the lock: drop what did not verify, compute what the cache lacks, read it back."""
    store, outputs_ok = query.store, query.use_cache and own.outputs is not None
    if own.problem is not None:
        _reject(info, own.problem, "recomputed")
    if not outputs_ok:  # damaged or stale files, leftover temporaries of a killed writer
        store.discard(query.key)
    elif own.problem is not None:
        store.discard(query.key, [own.problem.path.name])
    layers = None if outputs_ok and own.has_layers else query.spec
    request = _request(query, layers, not outputs_ok)
    uncached = Path(request["uncached"])
    uncached.unlink(missing_ok=True)  # only what this run writes is used
    if str(query.cfg.baseline.get("process", "child")) == "child":
        log_path = Path(query.log_dir) / CHILD_LOG
        log.info("CPU reference in a clean child process (torch_npu blocked); log: %s", log_path)
        label = f"reference (cpu {request['precision']})"
        ran = run_child("-", request, log_path, label, lambda: _estimate_bytes(query))
    else:
        ran = _run_in_process(request, query)
    info.update(cache_hit=False, computed=not outputs_ok, computed_layers=layers is not None, **ran)
    if uncached.is_file():
        return _uncached(uncached, info, own.precision)
    start = time.perf_counter()
    entry = _read_entry(store, query.key, own.precision, query.spec)
    if not entry.complete:
        why = f"{entry.problem.path} {entry.problem.why}" if entry.problem else "a file is missing"
        raise BaselineError(f"the CPU reference just written to {store.entry(query.key)} does not "
                            f"read back: {why}. Check the disk of baseline.cache_dir (full, "
                            "read-only, or shared with a process that rewrites it), then run the "
                            "job again.")
    return _served(entry, query, info, start)


def get_or_compute(query: ReferenceQuery) -> Baseline:
    """The job's reference outputs and layer captures (a :class:`BaselineError` if impossible)."""
    cfg, key = query.cfg, query.key
    if isinstance(query.spec, list) and query.module is not None:
        select_modules(query.module, query.spec)  # no pattern matching nothing reaches the child
    info: dict[str, Any] = {"cache_key": key, "path": str(query.store.entry(key)),
                            "cache_hit": True, "waited_s": 0.0, "computed": False,
                            "requested_precision": dtype_name(query.precision),
                            "computed_layers": False}
    found = _lookup(query, info)[0]
    if found is not None:
        log.info("CPU reference from the cache: %s", found.info["path"])
        return found
    owner = {"job": str(query.log_dir)}
    with query.store.lock(key, float(cfg.baseline.lock_timeout_s), owner) as wait:
        info["waited_s"] = wait.seconds
        if wait.holder:
            info["waited_for"] = wait.holder
        found, own = _lookup(query, info)  # another job may have computed it meanwhile
        return found if found is not None else _compute(query, own, info)
