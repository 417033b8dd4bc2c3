"""Get the CPU reference of a job: from the cache (verified), or computed once under a file lock.

``baseline.process=child`` (default) computes it in ``python -m ascendbench.baseline``, a fresh process
in which torch_npu cannot be imported and no device patch is applied; ``in-process`` reuses the job's
own float32 model (cast to the reference precision and back) and is refused where torch_npu is
importable. Either way the result is written to the cache, keyed by :mod:`ascendbench.baseline.key`.

One reference per workload: a cached reference of a higher precision serves a job that asks for a lower
one (a float64 entry serves a float32 request), so a dtype sweep computes one reference. A cache entry that
does not verify (digest, size, shapes, a damaged or old ``meta.json``) is logged, recorded under
``rejected`` and recomputed, never used and never fatal.
"""

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

from ascendbench.baseline.compute import run_reference
from ascendbench.baseline.key import cache_key, key_material
from ascendbench.baseline.process import (  # noqa: F401  (CHILD_LOG, PARENT_PID_ENV, ChildExit: read from here too)
    CHILD_LOG,
    PARENT_PID_ENV,
    ChildExit,
    ProgressWait,
    follow_child_progress,
    run_child,
    wait_with_progress,
)
from ascendbench.baseline.store import META, BaselineStore, DamagedEntry
from ascendbench.compare.select import normalize_spec, select_modules
from ascendbench.errors import BaselineError, ConfigError
from ascendbench.precision import REFERENCE_DTYPES, dtype_name

log = logging.getLogger(__name__)

PROCESSES = ("child", "in-process")


class Baseline(dict):
    """The reference outputs (name -> tensor), with ``info`` (the record's ``baseline``) and ``layers``
    (the layer capture: ``None``, module statistics, or ``{tensors, order, dropped}``)."""

    def __init__(self, outputs: Mapping[str, torch.Tensor], info: dict[str, Any], layers: Any = None) -> None:
        super().__init__(outputs)
        self.info = info
        self.layers = layers


@dataclass
class ReferenceQuery:
    """What one job's reference is computed from, and where it is cached (the key is computed once).

    Attributes:
        cfg: the job config (``baseline``, ``model``, ``preset``, ``seed``, ``compare`` are read).
        task: the job's task.
        inputs: the job's inputs (only used in-process; the child rebuilds and checks them).
        precision: the reference dtype.
        weights: the record's ``weights`` entry.
        inputs_info: the record's ``inputs`` entry.
        module: the job's float32 model on CPU (only used by ``baseline.process=in-process``).
        log_dir: where the child process writes its log (the job directory).
    """

    cfg: DictConfig
    task: Any
    inputs: Mapping[str, torch.Tensor]
    precision: torch.dtype
    weights: Mapping[str, Any]
    inputs_info: Mapping[str, Any]
    module: torch.nn.Module | None = None
    log_dir: Path = field(default_factory=Path)

    def material_for(self, precision: torch.dtype) -> dict[str, Any]:
        """What the cache key of this workload in ``precision`` is the hash of."""
        return key_material(self.cfg, self.weights, self.inputs_info, precision)

    @cached_property
    def material(self) -> dict[str, Any]:
        """What the cache key is the hash of."""
        return self.material_for(self.precision)

    @cached_property
    def key(self) -> str:
        """The content hash naming the cached reference in the requested precision."""
        return cache_key(self.material)

    @cached_property
    def candidates(self) -> list[tuple[str, str]]:
        """``(precision, key)`` of every entry that may serve this job, highest precision first, the requested
        one last: a float64 reference serves a float32 request of the same workload. A half-precision request
        (``baseline.reference=same``, the seeds' protocol) is served by that precision only."""
        if self.precision not in REFERENCE_DTYPES.values():
            return [(dtype_name(self.precision), self.key)]
        higher = sorted((d for d in REFERENCE_DTYPES.values() if d.itemsize > self.precision.itemsize),
                        key=lambda d: d.itemsize, reverse=True)
        found = [(dtype_name(d), cache_key(self.material_for(d))) for d in higher]
        return [*found, (dtype_name(self.precision), self.key)]

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

    def cached_entry(self) -> tuple[str, str] | None:
        """``(precision, key)`` of the entry that looks able to serve this job (outputs complete, layer captures
        present; the digests are checked when it is read), or ``None``."""
        if not self.use_cache:
            return None
        return next(((p, k) for p, k in self.candidates
                     if self.store.has_outputs(k) and self.store.has_layers(k, self.spec)), None)

    def cached(self) -> bool:
        """The reference (outputs and layer captures) is in the cache and will be reused."""
        return self.cached_entry() is not None


@dataclass
class _Entry:
    """What one cache entry holds once verified; ``problem`` is the first file that did not verify."""

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


def _check_meta(meta: Mapping[str, Any], entry: _Entry, path: Path) -> None:
    if meta.get("precision") != entry.precision:
        raise DamagedEntry(path, f"records precision {meta.get('precision')!r} for a {entry.precision} key")
    material = meta.get("material")
    if material is not None and cache_key(material) != entry.key:
        raise DamagedEntry(path, "records key material that does not hash to its key (edited)")


def _read_entry(store: BaselineStore, key: str, precision: str, spec: Any) -> _Entry:
    """Read and verify one entry; a plain miss leaves fields empty, damage sets ``problem``."""
    entry = _Entry(key, precision)
    try:
        meta = store.read_meta(key)
        _check_meta(meta, entry, store.entry(key) / META)
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
    """Log the bad file and why (once per job), and record it in ``info["rejected"]``."""
    rejected = info.setdefault("rejected", [])
    if any(r["file"] == str(problem.path) and r["why"] == problem.why for r in rejected):
        return
    rejected.append({"file": str(problem.path), "why": problem.why, "action": action})
    log.warning("baseline cache entry rejected: %s %s; %s", problem.path, problem.why, action)


def _served(entry: _Entry, query: ReferenceQuery, info: dict[str, Any], start: float) -> Baseline:
    meta, store = entry.meta or {}, query.store
    process = meta.get("process") or {}
    info.update(cache_key=entry.key, path=str(store.entry(entry.key)), precision=meta["precision"],
                seconds=meta.get("seconds"), process=process.get("kind"),
                torch_npu_blocked=process.get("torch_npu_blocked"), computed_at=meta.get("created_at"),
                load_s=time.perf_counter() - start)
    if entry.key != query.key:
        info["requested_key"] = query.key
        log.info("CPU reference: the cached %s reference serves this %s request (%s)", entry.precision,
                 info["requested_precision"], store.entry(entry.key))
    return Baseline(entry.outputs, info, entry.layers)


def _lookup(query: ReferenceQuery, info: dict[str, Any]) -> tuple[Baseline | None, _Entry]:
    """The first candidate entry that verifies completely, and the requested key's own entry."""
    own = _Entry(query.key, dtype_name(query.precision))
    for precision, key in query.candidates:
        start = time.perf_counter()
        entry = _read_entry(query.store, key, precision, query.spec)
        if key == query.key:
            own = entry
        if entry.problem is not None and key != query.key:
            _reject(info, entry.problem, f"not used; the {dtype_name(query.precision)} reference is used instead")
        if entry.complete:
            return _served(entry, query, info, start), own
    return None, own


def _request(query: ReferenceQuery, spec: Any, want_outputs: bool) -> dict[str, Any]:
    cfg = query.cfg
    config = {"model": OmegaConf.to_container(cfg.model, resolve=True),
              "preset": OmegaConf.to_container(cfg.preset, resolve=True), "seed": int(cfg.seed)}
    return {"config": config, "key": query.key, "material": dict(query.material), "cache_dir": str(query.store.root),
            "weights": dict(query.weights), "inputs": {k: dict(v) for k, v in query.inputs_info.items()},
            "precision": dtype_name(query.precision), "layers": spec, "want_outputs": want_outputs,
            "max_capture_bytes": int(float(cfg.compare.get("max_capture_mb", 4096)) * (1 << 20)),
            "owner": {"pid": os.getpid(), "host": socket.gethostname()}}


def _run_in_process(request: Mapping[str, Any], query: ReferenceQuery) -> dict[str, Any]:
    if "torch_npu" in sys.modules or importlib.util.find_spec("torch_npu") is not None:
        raise ConfigError(
            "baseline.process=in-process is refused here: torch_npu is importable, and diffusers then runs "
            "NPU kernels even for CPU tensors, which would contaminate the reference. Use baseline.process=child."
        )
    start, module = time.perf_counter(), query.module
    try:
        run = run_reference(module, query.task, query.inputs, query.precision, layers=request["layers"],
                            max_capture_bytes=request["max_capture_bytes"])
    finally:
        module.to(dtype=torch.float32)
    meta = {"key": request["key"], "material": request["material"], "precision": request["precision"],
            "seconds": run.seconds, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "process": {"kind": "in-process", "pid": os.getpid(), "torch_npu_blocked": False}}
    if request["want_outputs"]:
        query.store.write_outputs(request["key"], run.outputs, meta)
    if request["layers"] is not None:
        query.store.write_layers(request["key"], request["layers"], run.capture)
    return {"wall_s": time.perf_counter() - start}


def _prepare(query: ReferenceQuery, own: _Entry, info: dict[str, Any]) -> tuple[bool, Any]:
    """Under the lock: drop what did not verify; returns (compute the outputs?, layer spec to capture or None)."""
    outputs_ok = query.use_cache and own.outputs is not None
    if own.problem is not None:
        _reject(info, own.problem, "recomputed")
    if not outputs_ok:
        query.store.discard(query.key)  # damaged or stale files, leftover temporaries of a killed writer
    elif own.problem is not None:
        query.store.discard(query.key, [own.problem.path.name])
    layers = query.spec if not (outputs_ok and own.has_layers) else None
    return not outputs_ok, layers


def _compute(query: ReferenceQuery, own: _Entry, info: dict[str, Any]) -> Baseline:
    """Compute what the cache lacks (under the lock), then read it back verified."""
    want_outputs, layers = _prepare(query, own, info)
    request = _request(query, layers, want_outputs)
    process = str(query.cfg.baseline.get("process", "child"))
    ran = run_child(request, query) if process == "child" else _run_in_process(request, query)
    info.update(cache_hit=False, computed=want_outputs, computed_layers=layers is not None, **ran)
    start = time.perf_counter()
    entry = _read_entry(query.store, query.key, dtype_name(query.precision), query.spec)
    if not entry.complete:
        why = f"{entry.problem.path} {entry.problem.why}" if entry.problem else "a file is missing"
        raise BaselineError(f"the CPU reference just written to {query.store.entry(query.key)} does not read back: "
                            f"{why}. Check the disk of baseline.cache_dir (full, read-only, or shared with a "
                            "process that rewrites it), then run the job again.")
    return _served(entry, query, info, start)


def get_or_compute(query: ReferenceQuery) -> Baseline:
    """The reference outputs of this job (and its layer captures), cached by content hash and verified on read.

    Raises:
        ConfigError: ``baseline.process`` is not allowed.
        BaselineError: the reference could not be computed, or the cache lock timed out.
    """
    cfg = query.cfg
    process = str(cfg.baseline.get("process", "child"))
    if process not in PROCESSES:
        raise ConfigError(f"baseline.process={process!r} is not allowed; use child (default: a clean process "
                          "without torch_npu) or in-process (CPU-only hosts).")
    if isinstance(query.spec, list) and query.module is not None:
        select_modules(query.module, query.spec)  # a pattern matching nothing is a ConfigError here, not in the child
    key, store = query.key, query.store
    store.clean_stale_requests()
    info: dict[str, Any] = {"cache_key": key, "path": str(store.entry(key)), "cache_hit": True, "waited_s": 0.0,
                            "requested_precision": dtype_name(query.precision), "computed": False,
                            "computed_layers": False}
    if query.use_cache:
        found, _ = _lookup(query, info)
        if found is not None:
            log.info("CPU reference from the cache: %s", found.info["path"])
            return found
    with store.lock(key, float(cfg.baseline.lock_timeout_s), {"job": str(query.log_dir)}) as wait:
        info["waited_s"] = wait.seconds
        if wait.holder:
            info["waited_for"] = wait.holder
        own = _Entry(key, dtype_name(query.precision))
        if query.use_cache:  # another job may have computed it while this one waited
            found, own = _lookup(query, info)
            if found is not None:
                return found
        return _compute(query, own, info)
