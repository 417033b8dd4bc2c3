"""Get the CPU reference of a job: from the cache, or computed once under a file lock.

``baseline.process=child`` (default) computes it in ``python -m ascendbench.baseline``, a fresh process
in which torch_npu cannot be imported and no device patch is applied; ``in-process`` reuses the job's
own float32 model (cast to the reference precision and back) and is refused where torch_npu is
importable. Either way the result is written to the cache, keyed by :mod:`ascendbench.baseline.key`.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
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
from ascendbench.baseline.store import BaselineStore
from ascendbench.compare.select import normalize_spec, select_modules
from ascendbench.errors import BaselineError, ConfigError
from ascendbench.precision import dtype_name

log = logging.getLogger(__name__)

PROCESSES = ("child", "in-process")
CHILD_LOG = "baseline_child.log"


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

    @cached_property
    def material(self) -> dict[str, Any]:
        """What the cache key is the hash of."""
        return key_material(self.cfg, self.weights, self.inputs_info, self.precision)

    @cached_property
    def key(self) -> str:
        """The content hash naming the cached reference."""
        return cache_key(self.material)

    @cached_property
    def store(self) -> BaselineStore:
        """The cache under ``baseline.cache_dir``."""
        return BaselineStore(self.cfg.baseline.cache_dir)

    @property
    def use_cache(self) -> bool:
        """``baseline.cache``: read the cache (results are written either way)."""
        return bool(self.cfg.baseline.get("cache", True))

    def cached(self) -> bool:
        """The reference outputs are in the cache and will be reused."""
        return self.use_cache and self.store.has_outputs(self.key)


def _request(query: ReferenceQuery, spec: Any, want_outputs: bool) -> dict[str, Any]:
    cfg = query.cfg
    config = {"model": OmegaConf.to_container(cfg.model, resolve=True),
              "preset": OmegaConf.to_container(cfg.preset, resolve=True), "seed": int(cfg.seed)}
    return {"config": config, "key": query.key, "material": dict(query.material), "cache_dir": str(query.store.root),
            "weights": dict(query.weights), "inputs": {k: dict(v) for k, v in query.inputs_info.items()},
            "precision": dtype_name(query.precision), "layers": spec, "want_outputs": want_outputs,
            "max_capture_bytes": int(float(cfg.compare.get("max_capture_mb", 4096)) * (1 << 20))}


def _tail(path: Path, lines: int = 25) -> str:
    text = path.read_text(errors="replace").splitlines() if path.is_file() else []
    return "\n".join(text[-lines:])


def _run_child(request: Mapping[str, Any], store: BaselineStore, log_dir: Path) -> dict[str, Any]:
    entry = store.entry(request["key"])
    entry.mkdir(parents=True, exist_ok=True)
    request_path = entry / f"request-{os.getpid()}.json"
    request_path.write_text(json.dumps(request, default=str))
    log_path = Path(log_dir) / CHILD_LOG
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PYTHONUNBUFFERED": "1"}
    log.info("CPU reference in a clean child process (torch_npu blocked); log: %s", log_path)
    start = time.perf_counter()
    try:
        with open(log_path, "w") as handle:
            result = subprocess.run([sys.executable, "-m", "ascendbench.baseline", str(request_path)],
                                    stdout=handle, stderr=subprocess.STDOUT, env=env)
    finally:
        request_path.unlink(missing_ok=True)
    if result.returncode != 0:
        raise BaselineError(
            f"the CPU reference process (python -m ascendbench.baseline) exited with status {result.returncode}; "
            f"its log is {log_path}. Last lines:\n{_tail(log_path)}\nFix the cause above, or run with "
            "baseline.enabled=false for a performance-only run."
        )
    return {"wall_s": time.perf_counter() - start, "log": str(log_path)}


def _run_in_process(request: Mapping[str, Any], query: ReferenceQuery) -> dict[str, Any]:
    if "torch_npu" in sys.modules or importlib.util.find_spec("torch_npu") is not None:
        raise ConfigError(
            "baseline.process=in-process is refused here: torch_npu is importable, and diffusers then runs "
            "NPU kernels even for CPU tensors, which would contaminate the reference. Use baseline.process=child."
        )
    start, module = time.perf_counter(), query.module
    try:
        run = run_reference(module, query.task, query.inputs, query.precision, request["layers"],
                            request["max_capture_bytes"])
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


def _load(store: BaselineStore, key: str, spec: Any, info: dict[str, Any]) -> Baseline:
    start = time.perf_counter()
    meta = store.read_meta(key)
    outputs, layers = store.read_outputs(key), store.read_layers(key, spec)
    process = meta.get("process", {})
    info.update(precision=meta["precision"], seconds=meta["seconds"], process=process.get("kind"),
                torch_npu_blocked=process.get("torch_npu_blocked"), computed_at=meta.get("created_at"),
                load_s=time.perf_counter() - start)
    return Baseline(outputs, info, layers)


def get_or_compute(query: ReferenceQuery) -> Baseline:
    """The reference outputs of this job (and its layer captures), cached by content hash.

    Raises:
        ConfigError: ``baseline.process`` is not allowed.
        BaselineError: the reference could not be computed, or the cache lock timed out.
    """
    cfg = query.cfg
    process = str(cfg.baseline.get("process", "child"))
    if process not in PROCESSES:
        raise ConfigError(f"baseline.process={process!r} is not allowed; use child (default: a clean process "
                          "without torch_npu) or in-process (CPU-only hosts).")
    spec = normalize_spec(cfg.compare.get("layers"))
    if isinstance(spec, list) and query.module is not None:
        select_modules(query.module, spec)  # a pattern matching nothing is a ConfigError here, not in the child
    key, store = query.key, query.store
    info: dict[str, Any] = {"cache_key": key, "path": str(store.entry(key)), "cache_hit": True, "waited_s": 0.0}
    if query.cached() and store.has_layers(key, spec):
        log.info("CPU reference from the cache: %s", store.entry(key))
        return _load(store, key, spec, info)
    with store.lock(key, float(cfg.baseline.lock_timeout_s)) as waited:
        info["waited_s"] = waited
        have_outputs = query.cached()
        if not (have_outputs and store.has_layers(key, spec)):
            layers = spec if not (query.use_cache and store.has_layers(key, spec)) else None
            request = _request(query, layers, not have_outputs)
            ran = _run_child(request, store, query.log_dir) if process == "child" else _run_in_process(request, query)
            info.update(cache_hit=False, computed={"outputs": not have_outputs, "layers": layers is not None}, **ran)
        return _load(store, key, spec, info)
