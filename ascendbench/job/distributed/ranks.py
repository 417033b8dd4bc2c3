"""The device run as ``device.world_size`` spawned ranks of one torch.distributed group."""

from __future__ import annotations

import ctypes
import datetime
import json
import logging
import os
import shutil
import signal
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from omegaconf import DictConfig, OmegaConf
from safetensors.torch import load_file
from torch.multiprocessing.spawn import ProcessException

from ascendbench.bench.measure import Workload, attach_phase_timer, measure
from ascendbench.bench.stats import LatencyStats
from ascendbench.compare.files import save_tensors
from ascendbench.config.targets import build
from ascendbench.errors import RankFailedError, WeightsDigestError
from ascendbench.graph import compile_model, first_call
from ascendbench.job.distributed import modes
from ascendbench.job.distributed.modes import ParallelSettings
from ascendbench.job.placement import capture_warnings, other_ranks, placement_check
from ascendbench.job.record import write_json_atomic
from ascendbench.patches.registry import patches_applied
from ascendbench.precision import Precision
from ascendbench.tasks.inputs import move_inputs, place, summarize, tensor_sha256

log = logging.getLogger(__name__)

RANKS_DIR = "ranks"
RESULT_JSON = "result.json"
RESULT_TENSORS = "outputs.safetensors"
SYNC_CLOCK = ("barrier-synchronized: each timed call starts after a barrier and ends at a barrier "
              "on every rank; a call's time is the slowest rank's")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (the rendezvous when ``device.dist.master_port`` is 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def run_distributed(job: Any, settings: ParallelSettings) -> dict[str, Any]:
    """Run the device run as ranks; sets ``job.outputs`` (rank 0's), returns the sections."""
    modes.check_mode(settings, job.model, job.adapter.name)
    ranks_dir = Path(job.dir) / RANKS_DIR
    shutil.rmtree(ranks_dir, ignore_errors=True)
    ranks_dir.mkdir(parents=True)
    if not settings.master_port:
        settings = replace(settings, master_port=free_port(settings.master_addr))
    request = (OmegaConf.to_container(job.cfg, resolve=True), str(job.dir), settings,
               (job.weights or {}).get("digest"))  # pickled to each rank: no file read for it
    context = mp.start_processes(rank_main, args=request, nprocs=settings.world_size, join=False,
                                 start_method="spawn")  # spawn: no inherited device runtime
    pids = [p.pid for p in context.processes]
    log.info("%d ranks started (%s, port %d): pids %s", settings.world_size,
             f"{settings.mode}, {settings.backend}", settings.master_port, pids)
    job.record({"distributed": {**settings.to_dict(), "pids": pids}})
    try:
        while not context.join(timeout=0.5, grace_period=settings.grace_s):
            pass
    except ProcessException as exc:
        raise _rank_failure(exc, settings, ranks_dir, pids) from None
    finally:
        _stop_all(context)
    try:
        data = json.loads((ranks_dir / RESULT_JSON).read_text())  # written by our own rank 0
        outputs = load_file(str(ranks_dir / RESULT_TENSORS))
        bench, section = combine(data["bench"], data["ranks"], settings)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RankFailedError(f"the ranks all exited 0 but rank 0 left no readable result in "
                              f"{ranks_dir} ({type(exc).__name__}: {exc}); see "
                              f"{ranks_dir / 'rank0.log'}.") from exc
    if not section["outputs_agree"]:
        job.warn(f"the {settings.world_size} ranks ended with different outputs (digests in "
                 "distributed.ranks); the record keeps rank 0's")
    job.outputs = dict(outputs)
    job.placement = other_ranks(data["ranks"][0]["placement_check"], settings.world_size)
    return {"bench": bench, "distributed": section, "outputs": summarize(job.outputs),
            "placement_check": job.placement}


def _rank_failure(exc: ProcessException, settings: ParallelSettings, ranks_dir: Path,
                  pids: list[int]) -> RankFailedError:
    rank = int(exc.error_index)
    if isinstance(exc, mp.ProcessExitedException):
        how = (f"was killed by signal {exc.signal_name}" if exc.signal_name
               else f"exited with status {exc.exit_code}")
    else:
        try:
            noted = json.loads((ranks_dir / f"rank{rank}.error.json").read_text())
            message = " ".join(str(noted["message"]).split())[:600]
            how = f"failed: {str(noted['type'])[:80]}: {message}"
        except (OSError, ValueError, KeyError, TypeError):
            last = [line for line in str(exc).strip().splitlines() if line.strip()]
            how = f"failed: {last[-1][:600] if last else 'no message'}"
    return RankFailedError(
        f"rank {rank} of {settings.world_size} (pid {pids[rank]}) {how} during the device run "
        f"(device.parallel={settings.mode}, backend {settings.backend}); the other rank(s) were "
        f"stopped and none is left running. Its log: {ranks_dir / f'rank{rank}.log'}. Fix what it "
        "names and run the job again, or run it on one card (`device.world_size=1 "
        "device.parallel=none`) to see the error alone.")


def _stop_all(context: Any) -> None:
    for process in context.processes:
        if process.is_alive():
            process.terminate()
    for process in context.processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()


def synchronized_samples(ranks: Sequence[Mapping[str, Any]]) -> list[float]:
    """Per-call maxima over the ranks' host samples (ms); RankFailedError if counts differ."""
    counts = {int(r["rank"]): len(r["samples_ms"]) for r in ranks}
    if len(set(counts.values())) != 1:
        raise RankFailedError(f"the ranks timed different numbers of calls ({counts}); a "
                              "multi-card job needs the same fixed count on every rank "
                              "(bench.iters). Run it again; if it repeats, report it.")
    return [max(float(r["samples_ms"][i]) for r in ranks)
            for i in range(next(iter(counts.values())))]


def combine(bench: Mapping[str, Any], ranks: Sequence[Mapping[str, Any]],
            settings: ParallelSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(bench, distributed)`` sections from rank 0's bench and every rank's figures."""
    ranks = sorted(ranks, key=lambda r: int(r["rank"]))
    samples = synchronized_samples(ranks)
    latency = LatencyStats.from_ms(samples)
    keys = ("peak_allocated_mb", "peak_reserved_mb", "peak_rss_mb", "scope")
    per_rank = [{"rank": int(r["rank"]), "device": r["device"],
                 **{k: r["memory"].get(k) for k in keys}} for r in ranks]
    merged = {**bench, "latency": latency.to_dict(), "samples_ms": samples, "timer": SYNC_CLOCK,
              "memory_per_rank": per_rank, "rank0_latency": bench.get("latency")}
    merged["memory"] = {**dict(bench.get("memory") or {}),
                        "max_rank_peak_allocated_mb": max(p["peak_allocated_mb"] for p in per_rank)}
    throughput = dict(bench.get("throughput") or {})
    if throughput.get("items_per_call") and latency.median_ms > 0:
        throughput["value"] = throughput["items_per_call"] / (latency.median_ms / 1e3)
    merged["throughput"] = throughput
    digests = [r["outputs_sha256"] for r in ranks]
    fields = ("pid", "device", "device_name", "median_ms", "cold_ms")
    section = {**settings.to_dict(), "clock": SYNC_CLOCK,
               "outputs_agree": all(d == digests[0] for d in digests),
               "peak_allocated_mb_by_rank": {str(p["rank"]): p["peak_allocated_mb"]
                                             for p in per_rank},
               "ranks": [{"rank": int(r["rank"]), **{k: r[k] for k in fields},
                          "peak_allocated_mb": p["peak_allocated_mb"],
                          "outputs_sha256": r["outputs_sha256"], "mode": r.get("mode")}
                         for r, p in zip(ranks, per_rank, strict=True)]}
    return merged, section


def rank_main(rank: int, cfg: dict[str, Any], job_dir: str, settings: ParallelSettings,
              weights_digest: str | None) -> None:
    """A spawned rank's entry point; its error goes to ``ranks/rank<N>.error.json``, re-raised."""
    try:  # Linux: SIGKILL when the parent dies, so no rank outlives a killed job
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        log.debug("PR_SET_PDEATHSIG unavailable; the parent's join still stops the ranks")
    ranks = Path(job_dir) / RANKS_DIR
    handler = logging.FileHandler(ranks / f"rank{rank}.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    try:
        _run_rank(rank, OmegaConf.create(cfg), settings, weights_digest, ranks)
    except BaseException as exc:
        log.exception("rank %d failed", rank)
        write_json_atomic(ranks / f"rank{rank}.error.json",
                          {"type": type(exc).__name__, "message": str(exc)})
        raise


def _run_rank(rank: int, cfg: DictConfig, settings: ParallelSettings, digest: str | None,
              ranks: Path) -> None:
    cfg.device.index = int(cfg.device.get("index") or 0) + rank
    if cfg.device.name == "cpu" and cfg.device.get("threads") is None:  # ranks share the cores
        cfg.device.threads = max(1, len(os.sched_getaffinity(0)) // settings.world_size)
    adapter = build(cfg.device, "device", _convert_="all")
    precision = Precision.build(cfg, adapter.name)
    join_group(rank, adapter, settings)
    loaded = build(cfg.model.loader, "model.loader").load(
        cfg.model.source, cfg.model.weights, cfg.model.init_seed, cfg.model.get("revision"))
    _check_digest(rank, loaded.weights.get("digest"), digest)
    task = build(cfg.model.task, "model.task")
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    info: dict[str, Any] = {"name": settings.mode}
    model = loaded.module
    if settings.mode == "device_map":  # before placement: the card never holds the others' blocks
        info.update(modes.BlockPlacement(rank, settings.world_size).install(model).to_dict())
    model = place(task, model, adapter.torch_device, precision.dtype)
    moved = move_inputs(inputs, adapter.torch_device, precision.dtype)
    split = None
    if settings.mode == "cfg":
        info["branch"] = "conditional" if modes.CFG_PART[rank] == 1 else "unconditional"
        split = modes.CfgSplit(rank, model).install()
    elif settings.mode == "context":
        info.update(modes.enable_context_parallel(model, settings))
    (ranks / f"rank{rank}.pid").write_text(str(os.getpid()))  # in the group, placed: about to time
    phases = cfg.bench.enabled and cfg.bench.phases
    timer = attach_phase_timer(task, model, adapter) if phases else None
    workload = Workload(precision.name, task.items_per_call(inputs), task.unit, timer)
    synced = synchronized(lambda: task.run(model, moved), adapter)
    compiled = compile_model(model, adapter.name, cfg.device)  # device.compile on every rank alike
    with patches_applied(cfg.model.get("patches"), model, adapter.name, precision.name) as applied:
        if compiled is not None:
            compiled["first_call_ms"] = first_call(synced, adapter)
        with capture_warnings() as messages:
            result, bench = measure(synced, adapter, rank_bench(cfg.bench), workload)
    info["patches"] = applied
    if split is not None:
        info["denoiser_calls_split"] = split.calls
    if compiled is not None:
        bench["compile"] = {**compiled,
                            "compile_ms": compiled["first_call_ms"] - bench["latency"]["median_ms"]}
    mine = {"rank": rank, "pid": os.getpid(), "device": str(adapter.torch_device),
            "device_name": adapter.device_name(), "memory": bench["memory"],
            "cold_ms": bench["cold_ms"], "samples_ms": list(result.samples_ms),
            "median_ms": bench["latency"]["median_ms"], "mode": info}
    if rank == 0:  # torch_npu warns only where RANK is 0
        mine["placement_check"] = placement_check(
            model, result.first_outputs, adapter.torch_device, messages=messages,
            offloaded=bool(getattr(task, "cpu_offload", False)), device_type=adapter.name)
    _share(mine, result.first_outputs, bench, settings.world_size, ranks)


def _share(mine: dict[str, Any], outputs: Mapping[str, torch.Tensor], bench: dict[str, Any],
           world_size: int, ranks: Path) -> None:
    """Gather every rank's figures and output digests; rank 0 writes them all for the parent."""
    outputs = {k: v.detach().to("cpu") for k, v in outputs.items()}
    mine["outputs_sha256"] = {k: tensor_sha256(v) for k, v in outputs.items()}
    everyone: list[Any] = [None] * world_size
    dist.all_gather_object(everyone, mine)
    if mine["rank"] == 0:
        save_tensors(ranks / RESULT_TENSORS, outputs)
        write_json_atomic(ranks / RESULT_JSON, {"bench": bench, "ranks": everyone})
    dist.barrier()
    dist.destroy_process_group()


def join_group(rank: int, adapter: Any, settings: ParallelSettings) -> None:
    """Bind this process to its card (HCCL and NCCL take the current device), then join."""
    if adapter.runtime is not None and hasattr(adapter.runtime, "set_device"):
        adapter.runtime.set_device(adapter.index)
    gloo = settings.backend == "gloo"
    modes.set_rank_device(torch.device("cpu") if gloo else adapter.torch_device)
    os.environ.update(MASTER_ADDR=settings.master_addr, MASTER_PORT=str(settings.master_port),
                      RANK=str(rank), WORLD_SIZE=str(settings.world_size), LOCAL_RANK=str(rank))
    dist.init_process_group(settings.backend, rank=rank, world_size=settings.world_size,
                            timeout=datetime.timedelta(seconds=settings.timeout_s))
    log.info("rank %d of %d joined (%s at %s)", rank, settings.world_size, settings.backend,
             f"{settings.master_addr}:{settings.master_port}")


def _check_digest(rank: int, found: str | None, expected: str | None) -> None:
    if expected is not None and found != expected:
        raise WeightsDigestError(f"rank {rank} loaded weights of digest {found}, but the job's are "
                                 f"{expected}: the ranks would run different models. Point "
                                 "model.source at one copy every rank reads.")


def synchronized(call: Callable[[], Any], adapter: Any) -> Callable[[], Any]:
    """``call`` between two barriers: each rank's sample spans the same interval."""

    def bracketed() -> Any:
        dist.barrier()
        out = call()
        adapter.synchronize()
        dist.barrier()
        return out

    return bracketed


def rank_bench(bench: DictConfig) -> DictConfig:
    """``bench`` with a budget every rank keeps alike (fixed iterations, no time cap, no FLOPs)."""
    fixed = OmegaConf.to_container(bench, resolve=True)
    fixed.update(iters=int(fixed.get("iters") or fixed.get("min_iters") or 1), warmup_max=None,
                 max_time_s=1e9, min_time_s=0.0, precision=None)
    fixed["flops"] = {**(fixed.get("flops") or {}), "enabled": False}
    return OmegaConf.create(fixed)
