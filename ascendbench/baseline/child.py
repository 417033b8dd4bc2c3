"""The reference process: rebuild the model from the job config, run the task on CPU, write the cache.

Started by :func:`ascendbench.baseline.service.get_or_compute` as ``python -m ascendbench.baseline
REQUEST.json`` after :mod:`ascendbench.baseline.guard` has blocked ``torch_npu``. The request holds the
job's model / preset / seed config, the reference precision, what to compute (outputs, layers) and what
the job saw (weights digest, input SHA256s) so that any difference is an error, not a silent mismatch.
Exit status: 0 done, 2 an ascendbench error (message on stderr), 1 anything else (traceback on stderr).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from ascendbench.errors import AscendBenchError, BaselineError

log = logging.getLogger("ascendbench.baseline.child")


def _check_same(what: str, job: Any, here: Any, hint: str) -> None:
    if job != here:
        raise BaselineError(f"the reference process sees different {what} than the job: job {job!r}, reference "
                            f"process {here!r}. {hint}")


def _load(cfg: Any, weights: Mapping[str, Any]) -> Any:
    from hydra.utils import instantiate

    mode = "random" if weights.get("kind") == "random-init" else "required"
    loaded = instantiate(cfg.model.loader).load(cfg.model.source, mode, cfg.model.init_seed, cfg.model.get("revision"))
    if mode == "required":
        _check_same("weights", weights.get("digest"), loaded.weights.get("digest"),
                    "The files at model.source changed while the job ran; run the job again.")
    return loaded


def compute(request: Mapping[str, Any]) -> dict[str, Any]:
    """Do what ``request`` asks and write the results into the cache; returns ``meta.json``'s content."""
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from ascendbench.baseline.compute import run_reference
    from ascendbench.baseline.guard import torch_npu_blocked
    from ascendbench.baseline.store import BaselineStore
    from ascendbench.patches import patches_applied
    from ascendbench.tasks import describe

    cfg = OmegaConf.create(request["config"])
    loaded = _load(cfg, request["weights"])
    task = instantiate(cfg.model.task)
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    _check_same("inputs", request["inputs"], describe(inputs),
                "The task's inputs must be deterministic (drawn from a CPU torch.Generator seeded with `seed`).")
    with patches_applied(cfg.model.get("patches"), loaded.module, "cpu") as patches:  # as the job's CPU run
        run = run_reference(loaded.module, task, inputs, getattr(torch, request["precision"]), request.get("layers"),
                            int(request.get("max_capture_bytes", 4 << 30)))
    store = BaselineStore(request["cache_dir"])
    meta = {"key": request["key"], "material": request["material"], "precision": request["precision"],
            "seconds": run.seconds, "load_seconds": loaded.load_seconds,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "process": {"kind": "child", "pid": os.getpid(), "torch_npu_blocked": torch_npu_blocked(),
                        "python": sys.executable}, "patches": patches}
    if request.get("want_outputs", True):
        store.write_outputs(request["key"], run.outputs, meta)
    if request.get("layers") is not None:
        store.write_layers(request["key"], request["layers"], run.capture)
    return meta


def _quiet_empty_keep_in_float32(record: logging.LogRecord) -> bool:
    message = record.getMessage()
    return not (message.startswith("There are modules in") and ": []." in message)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m ascendbench.baseline REQUEST.json``."""
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    logging.getLogger("diffusers.models.modeling_utils").addFilter(_quiet_empty_keep_in_float32)
    if len(args) != 1:
        print("usage: python -m ascendbench.baseline REQUEST.json (written by an ascendbench job)", file=sys.stderr)
        return 2
    try:
        meta = compute(json.loads(Path(args[0]).read_text()))
    except AscendBenchError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    log.info("reference written (%.1f s, torch_npu blocked: %s)", meta["seconds"], meta["process"]["torch_npu_blocked"])
    return 0
