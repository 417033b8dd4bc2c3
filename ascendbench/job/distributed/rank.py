"""One rank of a multi-card job: a spawned process that joins the process group and runs the device run.

Each rank rebuilds what the parent's stages built, through the same stages (device, load, inputs: the
seeded random init and the CPU-generator inputs are identical on every rank, and the weights digest is
checked against the parent's), installs its parallel mode (:mod:`ascendbench.job.distributed.modes`), places the
model on its card (``device.index + rank``) and runs the bench loop with a fixed budget -- every rank makes the
same number of calls, so no collective waits for a rank that stopped early -- each call bracketed by barriers
(:func:`synchronized`). Then every rank's figures are all-gathered; rank 0 writes them and its outputs into
``<job dir>/ranks/`` for the parent (:mod:`ascendbench.job.distributed.launcher`).
"""

from __future__ import annotations

import ctypes
import datetime
import hashlib
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
from omegaconf import DictConfig, OmegaConf

from ascendbench.bench.measure import Workload, attach_phase_timer, measure
from ascendbench.errors import WeightsDigestError
from ascendbench.graph import compile_model, first_call
from ascendbench.job.artifacts import save_tensors
from ascendbench.job.distributed import modes
from ascendbench.job.distributed.settings import ParallelSettings
from ascendbench.job.job import Job
from ascendbench.job.record import RecordWriter, write_json_atomic
from ascendbench.job.stages.load import InputsStage, LoadStage
from ascendbench.job.stages.setup import DeviceStage
from ascendbench.patches.registry import patches_applied
from ascendbench.tasks.inputs import move_inputs, place

log = logging.getLogger(__name__)

RANKS_DIR = "ranks"
RESULT_JSON = "result.json"
RESULT_TENSORS = "outputs.safetensors"


@dataclass(frozen=True)
class RankRequest:
    """What the parent hands every rank (pickled by the spawn start method; no file is read for it).

    Attributes:
        cfg: the job's resolved config as plain containers.
        job_dir: the job directory (the ranks write below ``ranks/``).
        settings: world size, mode, backend, rendezvous.
        weights_digest: the digest of the weights the parent loaded (each rank must load the same).
    """

    cfg: dict[str, Any]
    job_dir: str
    settings: ParallelSettings
    weights_digest: str | None = None


class RankWriter(RecordWriter):
    """A rank's own notes (``ranks/rank<N>.json``, not a record: the report never reads it)."""

    def __init__(self, job_dir: Path, rank: int, config: dict[str, Any]) -> None:
        super().__init__(job_dir, config)
        self.path = Path(job_dir) / RANKS_DIR / f"rank{rank}.json"


def rank_main(rank: int, request: RankRequest) -> None:
    """The spawned rank's entry point (``torch.multiprocessing.start_processes`` passes ``rank`` first).

    An error is written to ``ranks/rank<N>.error.json`` (type and message, for the parent's paragraph) and
    raised again, so the process exits non-zero and the parent stops the other ranks."""
    _die_with_parent()
    ranks = Path(request.job_dir) / RANKS_DIR
    _log_to(ranks / f"rank{rank}.log")
    try:
        _run_rank(rank, request, ranks)
    except BaseException as exc:
        log.exception("rank %d failed", rank)
        write_json_atomic(ranks / f"rank{rank}.error.json", {"type": type(exc).__name__, "message": str(exc)})
        raise


def _run_rank(rank: int, request: RankRequest, ranks: Path) -> None:
    settings = request.settings
    cfg = OmegaConf.create(request.cfg)
    cfg.device.index = int(cfg.device.get("index") or 0) + rank
    if cfg.device.name == "cpu" and cfg.device.get("threads") is None:  # ranks share the host's cores
        cfg.device.threads = max(1, len(os.sched_getaffinity(0)) // settings.world_size)
    job = Job(cfg=cfg, dir=Path(request.job_dir), writer=RankWriter(Path(request.job_dir), rank, {}))
    DeviceStage().run(job)
    join_group(rank, job.adapter, settings)
    LoadStage().run(job)
    _check_digest(rank, job, request.weights_digest)
    InputsStage().run(job)
    call, mode_info = _prepare(rank, job, settings)
    (ranks / f"rank{rank}.pid").write_text(str(os.getpid()))  # in the group, model placed: about to time
    workload = Workload(job.precision.name, job.task.items_per_call(job.inputs), job.task.unit,
                        _phase_timer(job))
    synced = synchronized(call, job.adapter)
    compiled = compile_model(job.model, job.adapter.name, cfg.device)  # device.compile on every rank alike
    with patches_applied(cfg.model.get("patches"), job.model, job.adapter.name, job.precision.name) as applied:
        if compiled is not None:
            compiled["first_call_ms"] = first_call(synced, job.adapter)
        result, bench = measure(synced, job.adapter, rank_bench(cfg.bench), workload)
    mode_info["patches"] = applied
    if compiled is not None:
        bench["compile"] = {**compiled, "compile_ms": compiled["first_call_ms"] - bench["latency"]["median_ms"]}
    outputs = {k: v.detach().to("cpu") for k, v in result.first_outputs.items()}
    if (split := mode_info.pop("split", None)) is not None:
        mode_info["denoiser_calls_split"] = split.calls
    mine = {"rank": rank, "pid": os.getpid(), "device": str(job.adapter.torch_device),
            "device_name": job.adapter.device_name(), "memory": bench["memory"], "cold_ms": bench["cold_ms"],
            "samples_ms": list(result.samples_ms), "median_ms": bench["latency"]["median_ms"],
            "outputs_sha256": {k: tensor_sha256(v) for k, v in outputs.items()}, "mode": mode_info}
    everyone: list[Any] = [None] * settings.world_size
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        save_tensors(ranks / RESULT_TENSORS, outputs)
        write_json_atomic(ranks / RESULT_JSON, {"bench": bench, "ranks": everyone})
    dist.barrier()
    dist.destroy_process_group()


def join_group(rank: int, adapter: Any, settings: ParallelSettings) -> None:
    """Bind this process to its card (``torch.npu.set_device`` / ``torch.cuda.set_device``: HCCL and NCCL take the
    current device), then join the process group; gloo's collectives allocate on the CPU."""
    if adapter.runtime is not None and hasattr(adapter.runtime, "set_device"):
        adapter.runtime.set_device(adapter.index)
    modes.set_rank_device(adapter.torch_device if settings.backend != "gloo" else torch.device("cpu"))
    os.environ.update(MASTER_ADDR=settings.master_addr, MASTER_PORT=str(settings.master_port), RANK=str(rank),
                      WORLD_SIZE=str(settings.world_size), LOCAL_RANK=str(rank))
    dist.init_process_group(settings.backend, rank=rank, world_size=settings.world_size,
                            timeout=datetime.timedelta(seconds=settings.timeout_s))
    log.info("rank %d of %d joined (%s)", rank, settings.world_size,
             f"{settings.backend} at {settings.master_addr}:{settings.master_port}")


def _check_digest(rank: int, job: Job, expected: str | None) -> None:
    found = (job.weights or {}).get("digest")
    if expected is not None and found != expected:
        raise WeightsDigestError(f"rank {rank} loaded weights of digest {found}, but the job's are {expected}: the "
                                 "ranks would run different models. Point model.source at one copy every rank reads.")


def _prepare(rank: int, job: Job, settings: ParallelSettings) -> tuple[Callable[[], Any], dict[str, Any]]:
    """Install the mode and place the model: the call one timed iteration makes, and the mode's record entry
    (with the live :class:`~ascendbench.job.distributed.modes.CfgSplit` under ``split`` in cfg mode)."""
    info: dict[str, Any] = {"name": settings.mode}
    placement = None
    if settings.mode == "device_map":  # before placement: the card never holds the other ranks' blocks
        placement = modes.BlockPlacement(rank, settings.world_size).install(job.model)
        info.update(placement.to_dict())
    job.model = place(job.task, job.model, job.adapter.torch_device, job.precision.dtype)
    moved = move_inputs(job.inputs, job.adapter.torch_device, job.precision.dtype)
    if settings.mode == "cfg":
        info["branch"] = "conditional" if modes.CFG_PART[rank] == 1 else "unconditional"
        info["split"] = modes.CfgSplit(rank, job.model).install()
    elif settings.mode == "context":
        info.update(modes.enable_context_parallel(job.model, settings.world_size, job.adapter.name))

    def call() -> Any:
        return job.task.run(job.model, moved)

    return call, info


def _phase_timer(job: Job) -> Any:
    bench = job.cfg.bench
    return attach_phase_timer(job.task, job.model, job.adapter) if bench.enabled and bench.phases else None


def synchronized(call: Callable[[], Any], adapter: Any) -> Callable[[], Any]:
    """``call`` between two barriers: every rank's timed call starts when the slowest rank is ready and ends when
    the slowest has finished, so each rank's sample spans the same interval (a barrier-synchronized clock)."""

    def bracketed() -> Any:
        dist.barrier()
        out = call()
        adapter.synchronize()
        dist.barrier()
        return out

    return bracketed


def rank_bench(bench: DictConfig) -> DictConfig:
    """``bench`` with a budget every rank follows to the same count: ``iters`` fixed (``bench.iters``, else
    ``min_iters``), exactly ``warmup`` warm-up calls, no time cap, no FLOP count (its extra call is not a
    collective every rank is sure to make)."""
    fixed = OmegaConf.to_container(bench, resolve=True)
    fixed.update(iters=int(fixed.get("iters") or fixed.get("min_iters") or 1), warmup_max=None,
                 max_time_s=1e9, min_time_s=0.0, precision=None)
    fixed["flops"] = {**(fixed.get("flops") or {}), "enabled": False}
    return OmegaConf.create(fixed)


def tensor_sha256(tensor: torch.Tensor) -> str:
    """SHA256 of a CPU tensor's bytes (any dtype)."""
    flat = tensor.detach().contiguous().reshape(-1)
    return hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def _die_with_parent() -> None:
    """Linux: this rank gets SIGKILL when the parent dies, so no rank outlives a killed job."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        log.debug("PR_SET_PDEATHSIG unavailable; the parent's join still stops the ranks")


def _log_to(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
