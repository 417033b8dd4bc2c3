"""The reference process: rebuild the model from the job config, run the task on CPU, write the cache.

Started by :func:`ascendbench.baseline.service.get_or_compute` as ``python -m ascendbench.baseline -``
(the request on stdin, over the job's pipe, never a file in the shared cache) after
:mod:`ascendbench.baseline.guard` has blocked ``torch_npu``. The request holds the job's model / preset /
seed config, the reference precision, what to compute (outputs, layers) and what the job saw (weights
digest, input SHA256s) so that any difference is an error, not a silent mismatch.
Exit status: 0 done, 2 an ascendbench error (message on stderr), 1 anything else (traceback on stderr).

The reference runs the model's own (upstream) code: ``model.patches`` are not applied here, except an entry
declared ``reference: true`` (a patch without which the model cannot run on CPU at all); ``meta.json``
lists what was applied. A float64 reference runs bounded (:mod:`ascendbench.baseline.bounded`).

Progress goes to stdout (the job's ``baseline_child.log``) as lines ``ascendbench-progress {json}``: the
blocks done (forward calls of the model's ``*blocks`` list entries and mid blocks) of a total counted on
the meta device first; :func:`ascendbench.baseline.process.wait_with_progress` turns them into the job's
heartbeat.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

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


PROGRESS_PREFIX = "ascendbench-progress "
REFERENCE_PATCH_KEY = "reference"


def reference_patches(specs: Any) -> list[Any]:
    """The ``model.patches`` entries the reference applies: only those declared ``reference: true`` (the key
    removed, so the patch sees its own options); the others belong to the device run."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(specs, (DictConfig, ListConfig)):
        specs = OmegaConf.to_container(specs, resolve=True)
    return [{k: v for k, v in entry.items() if k != REFERENCE_PATCH_KEY} for entry in specs or []
            if isinstance(entry, Mapping) and entry.get(REFERENCE_PATCH_KEY) is True]


def rss_mb() -> float:
    """This process's resident memory now, in MB (0 where ``/proc`` is missing)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024) / 1e6


def progress_modules(model: Any) -> list[Any]:
    """The blocks progress counts: entries of module lists named ``*blocks`` and modules named ``mid_block``
    (of ``model``, or of each module component of a pipeline)."""
    import torch

    roots = [model] if isinstance(model, torch.nn.Module) else [
        m for m in (getattr(model, "components", None) or {}).values() if isinstance(m, torch.nn.Module)]
    found = []
    for root in roots:
        for name, module in root.named_modules():
            parent, _, last = name.rpartition(".")
            if last == "mid_block" or (last.isdigit() and parent.rpartition(".")[2].endswith("blocks")):
                found.append(module)
    return found


@dataclass
class BlockProgress:
    """Counts block calls and writes a progress line (at most every ``interval_s``, and the last one)."""

    total: int | None
    write: Callable[[str], None]
    interval_s: float = 1.0
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    _start: float = field(default=0.0)
    _last: float = field(default=-1e9)

    def __post_init__(self) -> None:
        self._start = self.clock()

    def __call__(self, *_: Any) -> None:
        """A forward hook: one more block done."""
        self.done += 1
        now = self.clock()
        if now - self._last >= self.interval_s or self.done == self.total:
            self._last = now
            payload = {"done": self.done, "total": self.total, "unit": "blocks",
                       "elapsed_s": round(now - self._start, 2)}
            self.write(PROGRESS_PREFIX + json.dumps(payload))


def count_blocks(model: Any, task: Any, inputs: Mapping[str, Any], blocks: list[Any]) -> int | None:
    """How many block calls ``task.run`` makes, counted in a run on the meta device (``None``: not countable)."""
    import torch

    from ascendbench.models.memory import activation_bytes

    counter = BlockProgress(None, lambda line: None, interval_s=float("inf"))
    handles = [block.register_forward_hook(counter) for block in blocks]
    try:
        activation_bytes(model, task, inputs, torch.float32)
    except Exception as exc:  # pipelines and data-dependent tasks cannot run on meta: no total, no ETA
        log.info("progress without a total (%s: %s)", type(exc).__name__, str(exc)[:120])
        return None
    finally:
        for handle in handles:
            handle.remove()
    return counter.done or None


@contextlib.contextmanager
def reporting_progress(model: Any, task: Any, inputs: Mapping[str, Any]) -> Iterator[BlockProgress]:
    """Hooks on the model's blocks that print progress lines while the reference runs."""
    blocks = progress_modules(model)
    total = count_blocks(model, task, inputs, blocks) if blocks else None
    progress = BlockProgress(total, lambda line: print(line, flush=True))
    handles = [block.register_forward_hook(progress) for block in blocks]
    try:
        yield progress
    finally:
        for handle in handles:
            handle.remove()


def compute(request: Mapping[str, Any]) -> dict[str, Any]:
    """Do what ``request`` asks and write the results into the cache; returns ``meta.json``'s content."""
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from ascendbench.baseline.compute import run_reference
    from ascendbench.baseline.guard import torch_npu_blocked
    from ascendbench.baseline.store import BaselineStore
    from ascendbench.patches.registry import patches_applied
    from ascendbench.tasks.inputs import describe

    cfg = OmegaConf.create(request["config"])
    memory = {"imports_rss_mb": rss_mb()}
    loaded = _load(cfg, request["weights"])
    task = instantiate(cfg.model.task)
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    _check_same("inputs", request["inputs"], describe(inputs),
                "The task's inputs must be deterministic (drawn from a CPU torch.Generator seeded with `seed`).")
    memory["loaded_rss_mb"] = rss_mb()
    with patches_applied(reference_patches(cfg.model.get("patches")), loaded.module, "cpu") as patches, \
            reporting_progress(loaded.module, task, inputs):
        capture_limit = int(request.get("max_capture_bytes", 4 << 30))
        run = run_reference(loaded.module, task, inputs, getattr(torch, request["precision"]),
                            layers=request.get("layers"), max_capture_bytes=capture_limit)
    memory["peak_rss_mb"] = peak_rss_mb()
    store = BaselineStore(request["cache_dir"])
    meta = {"key": request["key"], "material": request["material"], "precision": request["precision"],
            "seconds": run.seconds, "load_seconds": loaded.load_seconds,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "process": {"kind": "child", "pid": os.getpid(), "torch_npu_blocked": torch_npu_blocked(),
                        "python": sys.executable, **memory},
            "patches": patches, "bounded": run.bounded}
    if request.get("want_outputs", True):
        store.write_outputs(request["key"], run.outputs, meta)
    if request.get("layers") is not None:
        store.write_layers(request["key"], request["layers"], run.capture)
    return meta


def _quiet_empty_keep_in_float32(record: logging.LogRecord) -> bool:
    message = record.getMessage()
    return not (message.startswith("There are modules in") and ": []." in message)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m ascendbench.baseline -``: the request is read from stdin (the job's pipe)."""
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    logging.getLogger("diffusers.models.modeling_utils").addFilter(_quiet_empty_keep_in_float32)
    if args != ["-"]:
        print("usage: python -m ascendbench.baseline - (the request of an ascendbench job on stdin; a request "
              "file is not accepted: nothing read from a file another user could write is instantiated)",
              file=sys.stderr)
        return 2
    try:
        meta = compute(json.loads(sys.stdin.read()))
    except AscendBenchError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    process = meta["process"]
    resident = (f"{process['imports_rss_mb']:.0f} MB after imports, {process['loaded_rss_mb']:.0f} MB loaded, "
                f"{process['peak_rss_mb']:.0f} MB peak")
    log.info("reference written (%.1f s, torch_npu blocked: %s; resident memory: %s)", meta["seconds"],
             process["torch_npu_blocked"], resident)
    return 0
