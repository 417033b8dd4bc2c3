"""The reference run (CPU, reference precision, layers hooked) of the baseline child process."""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch
from omegaconf import OmegaConf

from ascendbench.baseline.bounded import bounded_if_float64
from ascendbench.baseline.key import reference_patches
from ascendbench.baseline.process import PROGRESS_PREFIX, RSS_SCALE
from ascendbench.baseline.store import BaselineStore
from ascendbench.compare import msprobe
from ascendbench.compare.files import save_tensors
from ascendbench.compare.hooks import capturing
from ascendbench.compare.select import named_modules
from ascendbench.config.targets import build
from ascendbench.errors import AscendBenchError, BaselineError, OutputWriteError
from ascendbench.models.memory import activation_bytes
from ascendbench.patches.registry import patches_applied
from ascendbench.precision import dtype_name
from ascendbench.tasks.inputs import describe, move_inputs, place

log = logging.getLogger(__name__)
UNCACHED_WHY = "cache_write_error"  # the uncached reference file's metadata: why


@dataclass
class ReferenceRun:
    """Outputs (CPU), the layer capture (or ``None``), the seconds, the float64 bounding's stats."""

    outputs: dict[str, torch.Tensor]
    capture: Any
    seconds: float
    bounded: dict[str, Any] = field(default_factory=dict)


def run_reference(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                  precision: torch.dtype, layers: str | list[str] | None = None,
                  max_capture_bytes: int = 4 << 30) -> ReferenceRun:
    """Cast ``module`` (in place) and the float inputs to ``precision``, run ``task`` on CPU."""
    log.info("CPU reference run in %s ...", dtype_name(precision))
    start = time.perf_counter()
    module = task.to(module, torch.device("cpu"), precision)  # pipelines and VAEs have their own
    cast = {k: v.to("cpu", precision) if v.is_floating_point() else v.to("cpu")
            for k, v in inputs.items()}
    with capturing(module, layers, max_capture_bytes) as capture, \
            bounded_if_float64(precision) as bounded:
        outputs = {k: v.detach().to("cpu") for k, v in task.run(module, cast).items()}
    seconds = time.perf_counter() - start
    tiled = (f" ({bounded['tiled_convolutions']} of {bounded['convolutions']} convolutions tiled)"
             if bounded else "")
    log.info("CPU reference done in %.1f s%s", seconds, tiled)
    return ReferenceRun(outputs, capture, seconds, bounded)


def write_entry(store: BaselineStore, request: Mapping[str, Any], run: ReferenceRun,
                extra: Mapping[str, Any]) -> dict[str, Any]:
    """Cache what ``request`` asked for (its meta); if unwritable, ``request["uncached"]``."""
    meta = {"key": request["key"], "material": request["material"],
            "precision": request["precision"], "seconds": run.seconds,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "bounded": run.bounded, **extra}
    try:
        if request["want_outputs"]:
            store.write_outputs(request["key"], run.outputs, meta)
        if request["layers"] is not None:
            store.write_layers(request["key"], request["layers"], run.capture)
    except OutputWriteError as exc:
        log.warning("the CPU reference could not be cached: %s", exc)
        save_tensors(Path(request["uncached"]), run.outputs, {UNCACHED_WHY: str(exc)})
    return meta


def progress_modules(model: Any) -> list[Any]:
    """The blocks progress counts: entries of ``*blocks`` lists and ``mid_block``s."""
    found = []
    for name, module in named_modules(model).items():  # of a pipeline: ``<component>.<name>``
        parent, _, last = name.rpartition(".")
        if last == "mid_block" or (last.isdigit() and parent.rpartition(".")[2].endswith("blocks")):
            found.append(module)
    return found


@dataclass
class BlockProgress:
    """A forward hook counting block calls; a progress line at most every ``interval_s``."""

    total: int | None
    write: Callable[[str], None]
    interval_s: float = 1.0
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    _start: float = 0.0
    _last: float = -1e9

    def __post_init__(self) -> None:
        self._start = self.clock()

    def __call__(self, *_: Any) -> None:
        self.done += 1
        now = self.clock()
        if now - self._last >= self.interval_s or self.done == self.total:
            self._last = now
            payload = {"done": self.done, "total": self.total, "unit": "blocks",
                       "elapsed_s": round(now - self._start, 2)}
            self.write(PROGRESS_PREFIX + json.dumps(payload))


@contextlib.contextmanager
def _hooked(blocks: list[Any], hook: Callable[..., None]) -> Iterator[None]:
    handles = [block.register_forward_hook(hook) for block in blocks]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def count_blocks(model: Any, task: Any, inputs: Mapping[str, Any], blocks: list[Any]) -> int | None:
    """How many block calls ``task.run`` makes, counted on the meta device (``None``: not known)."""
    counter = BlockProgress(None, lambda line: None, interval_s=float("inf"))
    try:
        with _hooked(blocks, counter):
            activation_bytes(model, task, inputs, torch.float32)
    except Exception as exc:  # pipelines and data-dependent tasks cannot run on meta: no total
        log.info("progress without a total (%s: %s)", type(exc).__name__, str(exc)[:120])
        return None
    return counter.done or None


def _rss_mb() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _check_same(what: str, job: Any, here: Any, hint: str) -> None:
    if job != here:
        raise BaselineError(f"the reference process sees different {what} than the job: job "
                            f"{job!r}, reference process {here!r}. {hint}")


def compute(request: Mapping[str, Any]) -> dict[str, Any]:
    """Do what ``request`` asks and write the results into the cache; returns the meta."""
    cfg = OmegaConf.create(request["config"])
    memory = {"imports_rss_mb": _rss_mb()}
    weights = request["weights"]
    mode = "random" if weights.get("kind") == "random-init" else "required"
    loader = build(cfg.model.loader, "model.loader")
    loaded = loader.load(cfg.model.source, mode, cfg.model.init_seed, cfg.model.get("revision"))
    if mode == "required":
        _check_same("weights", weights.get("digest"), loaded.weights.get("digest"),
                    "The files at model.source changed while the job ran; run the job again.")
    task = build(cfg.model.task, "model.task")
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    _check_same("inputs", request["inputs"], describe(inputs), "The task's inputs must be "
                "deterministic (drawn from a CPU torch.Generator seeded with `seed`).")
    memory["loaded_rss_mb"] = _rss_mb()
    blocks = progress_modules(loaded.module)
    total = count_blocks(loaded.module, task, inputs, blocks) if blocks else None
    specs = reference_patches(cfg.model.get("patches"))
    with patches_applied(specs, loaded.module, "cpu") as patches, \
            _hooked(blocks, BlockProgress(total, lambda line: print(line, flush=True))):
        run = run_reference(loaded.module, task, inputs, getattr(torch, request["precision"]),
                            layers=request["layers"],
                            max_capture_bytes=int(request["max_capture_bytes"]))
    memory["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * RSS_SCALE / 1e6
    blocked = "torch_npu" in sys.modules and sys.modules["torch_npu"] is None
    process = {"kind": "child", "pid": os.getpid(), "torch_npu_blocked": blocked,
               "python": sys.executable, **memory}
    extra = {"process": process, "patches": patches, "load_seconds": loaded.load_seconds}
    return write_entry(BaselineStore(request["cache_dir"]), request, run, extra)


def _not_empty_keep_in_float32(record: logging.LogRecord) -> bool:
    message = record.getMessage()
    return not (message.startswith("There are modules in") and ": []." in message)


def main() -> int:
    """``python -m ascendbench.baseline -``: the request is read from stdin (the job's pipe)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    logging.getLogger("diffusers.models.modeling_utils").addFilter(_not_empty_keep_in_float32)
    try:
        meta = compute(json.loads(sys.stdin.read()))
    except AscendBenchError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    process = meta["process"]
    resident = (f"{process['imports_rss_mb']:.0f} MB after imports, "
                f"{process['loaded_rss_mb']:.0f} MB loaded, {process['peak_rss_mb']:.0f} MB peak")
    log.info("reference written (%.1f s, torch_npu blocked: %s; resident memory: %s)",
             meta["seconds"], process["torch_npu_blocked"], resident)
    return 0


def msprobe_main() -> int:
    """``python -m ascendbench.baseline msprobe | msprobe-device``: load, place and run the model
    once under msprobe as the request on stdin says; the device side then runs msprobe's compare."""
    try:
        request = json.loads(sys.stdin.read())
        sys.path += [p for p in request["path"] if p not in sys.path]  # the job's, for its imports
        for name in request["imports"]:  # the modules that registered the job's patches
            importlib.import_module(name)
        cfg = OmegaConf.create(request["config"])
        random = request["weights_kind"] == "random-init"
        loaded = build(cfg.model.loader, "model.loader").load(
            cfg.model.source, "random" if random else "required", cfg.model.init_seed,
            cfg.model.get("revision"))
        task = build(cfg.model.task, "model.task")
        device, dtype = request["device"], getattr(torch, request["precision"])
        reference = request["side"] == "reference"
        patches = cfg.model.get("patches")
        specs = reference_patches(patches) if reference else patches
        module = place(task, loaded.module, device, dtype)
        inputs = move_inputs(task.make_inputs(cfg.preset, cfg.seed), device, dtype)
        root, precision = Path(request["root"]), None if reference else request["precision"]
        with patches_applied(specs, module, request["adapter"], precision), \
                msprobe.dumping(root / request["side"], request["level"], module), torch.no_grad():
            task.run(module, inputs)
        if not reference:
            from msprobe.pytorch.compare.distributed_compare import compare_distributed

            compare_distributed(str(root / "device" / "step0"), str(root / "reference" / "step0"),
                                str(root / "compare"))
    except AscendBenchError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0
