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
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.baseline.compute import run_reference
from ascendbench.baseline.key import cache_key, key_material
from ascendbench.baseline.store import BaselineStore
from ascendbench.compare.select import normalize_spec, select_modules
from ascendbench.errors import BaselineError, ConfigError

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


def _request(cfg: DictConfig, key: str, material: Mapping[str, Any], store: BaselineStore, weights: Mapping[str, Any],
             inputs_info: Mapping[str, Any], precision: torch.dtype, spec: Any, want_outputs: bool) -> dict[str, Any]:
    config = {"model": OmegaConf.to_container(cfg.model, resolve=True),
              "preset": OmegaConf.to_container(cfg.preset, resolve=True), "seed": int(cfg.seed)}
    return {"config": config, "key": key, "material": dict(material), "cache_dir": str(store.root),
            "weights": dict(weights), "inputs": {k: dict(v) for k, v in inputs_info.items()},
            "precision": str(precision).replace("torch.", ""), "layers": spec, "want_outputs": want_outputs,
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


def _run_in_process(request: Mapping[str, Any], module: torch.nn.Module, task: Any,
                    inputs: Mapping[str, torch.Tensor], store: BaselineStore, precision: torch.dtype) -> dict[str, Any]:
    if "torch_npu" in sys.modules or importlib.util.find_spec("torch_npu") is not None:
        raise ConfigError(
            "baseline.process=in-process is refused here: torch_npu is importable, and diffusers then runs "
            "NPU kernels even for CPU tensors, which would contaminate the reference. Use baseline.process=child."
        )
    start = time.perf_counter()
    try:
        run = run_reference(module, task, inputs, precision, request["layers"], request["max_capture_bytes"])
    finally:
        module.to(dtype=torch.float32)
    meta = {"key": request["key"], "material": request["material"], "precision": request["precision"],
            "seconds": run.seconds, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "process": {"kind": "in-process", "pid": os.getpid(), "torch_npu_blocked": False}}
    if request["want_outputs"]:
        store.write_outputs(request["key"], run.outputs, meta)
    if request["layers"] is not None:
        store.write_layers(request["key"], request["layers"], run.capture)
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


def get_or_compute(cfg: DictConfig, module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                   precision: torch.dtype, weights: Mapping[str, Any], inputs_info: Mapping[str, Any],
                   log_dir: Path) -> Baseline:
    """The reference outputs of this job (and its layer captures), cached by content hash.

    Args:
        cfg: the job config (``baseline``, ``model``, ``preset``, ``seed``, ``compare`` are read).
        module: the job's float32 model on CPU (only used by ``baseline.process=in-process``).
        task: the job's task.
        inputs: the job's inputs (only used in-process; the child rebuilds and checks them).
        precision: the reference dtype.
        weights: the record's ``weights`` entry.
        inputs_info: the record's ``inputs`` entry.
        log_dir: where the child process writes its log (the job directory).

    Raises:
        ConfigError: ``baseline.process`` is not allowed.
        BaselineError: the reference could not be computed, or the cache lock timed out.
    """
    process = str(cfg.baseline.get("process", "child"))
    if process not in PROCESSES:
        raise ConfigError(f"baseline.process={process!r} is not allowed; use child (default: a clean process "
                          "without torch_npu) or in-process (CPU-only hosts).")
    spec = normalize_spec(cfg.compare.get("layers"))
    if isinstance(spec, list) and module is not None:
        select_modules(module, spec)  # a pattern matching nothing is a ConfigError here, not in the child
    material = key_material(cfg, weights, inputs_info, precision)
    key = cache_key(material)
    store = BaselineStore(cfg.baseline.cache_dir)
    info: dict[str, Any] = {"cache_key": key, "path": str(store.entry(key)), "cache_hit": True, "waited_s": 0.0}
    use_cache = bool(cfg.baseline.get("cache", True))
    if use_cache and store.has_outputs(key) and store.has_layers(key, spec):
        log.info("CPU reference from the cache: %s", store.entry(key))
        return _load(store, key, spec, info)
    with store.lock(key, float(cfg.baseline.lock_timeout_s)) as waited:
        info["waited_s"] = waited
        have_outputs = use_cache and store.has_outputs(key)
        if not (have_outputs and store.has_layers(key, spec)):
            layers = spec if not (use_cache and store.has_layers(key, spec)) else None
            request = _request(cfg, key, material, store, weights, inputs_info, precision, layers, not have_outputs)
            ran = (_run_child(request, store, log_dir) if process == "child"
                   else _run_in_process(request, module, task, inputs, store, precision))
            info.update(cache_hit=False, computed={"outputs": not have_outputs, "layers": layers is not None}, **ran)
        return _load(store, key, spec, info)
