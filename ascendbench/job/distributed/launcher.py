"""Start a job's ranks, wait for them, and stop every one of them when any fails.

The ranks are spawned processes (``torch.multiprocessing.start_processes``, start method ``spawn``: no
inherited device runtime), one per card, rendezvousing on ``MASTER_ADDR:MASTER_PORT`` (127.0.0.1 and a free
port by default). The parent waits on all of them; when one exits non-zero or is killed, the others get
``device.dist.grace_s`` to exit, then SIGTERM, then SIGKILL (torch's ``ProcessContext.join``), and the job fails
with :class:`~ascendbench.errors.RankFailedError` naming the rank. Whatever ends the wait (an error, Ctrl-C),
no rank is left running (:func:`_stop_all`); each rank also dies with its parent (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch.multiprocessing as mp
from omegaconf import OmegaConf
from safetensors.torch import load_file
from torch.multiprocessing.spawn import ProcessException

from ascendbench.errors import RankFailedError
from ascendbench.job.distributed import rank as rank_module  # the module (a rank imports the job, which imports this)
from ascendbench.job.distributed.settings import ParallelSettings

log = logging.getLogger(__name__)


@dataclass
class RanksResult:
    """What rank 0 handed back: its bench section, every rank's figures and its outputs (CPU tensors)."""

    bench: dict[str, Any]
    ranks: list[dict[str, Any]]
    outputs: dict[str, Any]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (the rendezvous port when ``device.dist.master_port`` is 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def run_ranks(cfg: Any, job_dir: Path, settings: ParallelSettings, weights_digest: str | None,
              on_start: Any = None) -> RanksResult:
    """Run the device run as ``settings.world_size`` ranks and return rank 0's result.

    Args:
        cfg: the job's config (resolved here, so every rank gets the same plain values).
        job_dir: the job directory; ``ranks/`` below it is emptied first.
        settings: the checked parallel settings.
        weights_digest: the parent's weights digest (every rank must load the same weights).
        on_start: called with the ranks' pids once they are started (the record keeps them).

    Raises:
        RankFailedError: a rank failed or was killed (the message names it); no rank is left running.
    """
    ranks_dir = Path(job_dir) / rank_module.RANKS_DIR
    shutil.rmtree(ranks_dir, ignore_errors=True)
    ranks_dir.mkdir(parents=True)
    if not settings.master_port:
        settings = replace(settings, master_port=free_port(settings.master_addr))
    request = rank_module.RankRequest(cfg=OmegaConf.to_container(cfg, resolve=True), job_dir=str(job_dir),
                                      settings=settings, weights_digest=weights_digest)
    context = mp.start_processes(rank_module.rank_main, args=(request,), nprocs=settings.world_size, join=False,
                                 start_method="spawn")
    pids = [p.pid for p in context.processes]
    log.info("%d ranks started (%s): pids %s", settings.world_size,
             f"{settings.mode}, {settings.backend}, port {settings.master_port}", pids)
    if on_start is not None:
        on_start(pids)
    try:
        while not context.join(timeout=0.5, grace_period=settings.grace_s):
            pass
    except ProcessException as exc:
        raise _rank_failure(exc, settings, ranks_dir, pids) from None
    finally:
        _stop_all(context)
    return _read_result(ranks_dir)


def _rank_failure(exc: ProcessException, settings: ParallelSettings, ranks_dir: Path,
                  pids: list[int]) -> RankFailedError:
    rank = int(exc.error_index)
    how = _how_it_ended(exc, ranks_dir / f"rank{rank}.error.json")
    return RankFailedError(
        f"rank {rank} of {settings.world_size} (pid {pids[rank]}) {how} during the device run (device.parallel="
        f"{settings.mode}, backend {settings.backend}); the other rank(s) were stopped and none is left running. "
        f"Its log: {ranks_dir / f'rank{rank}.log'}. Fix what it names and run the job again, or run it on one card "
        "(`device.world_size=1 device.parallel=none`) to see the error alone.")


def _how_it_ended(exc: ProcessException, error_file: Path) -> str:
    if isinstance(exc, mp.ProcessExitedException):
        if exc.signal_name:
            return f"was killed by signal {exc.signal_name}"
        return f"exited with status {exc.exit_code}"
    try:
        noted = json.loads(error_file.read_text())
        return f"failed: {str(noted['type'])[:80]}: {' '.join(str(noted['message']).split())[:600]}"
    except (OSError, ValueError, KeyError, TypeError):
        last = [line for line in str(exc).strip().splitlines() if line.strip()]
        return f"failed: {last[-1][:600] if last else 'no message'}"


def _stop_all(context: Any) -> None:
    """Terminate, then kill, every rank still alive, and reap them all (an interrupted or failed wait)."""
    for process in context.processes:
        if process.is_alive():
            process.terminate()
    for process in context.processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()


def _read_result(ranks_dir: Path) -> RanksResult:
    """Rank 0's result files (written by our own rank; checked for the fields the gather needs)."""
    try:
        data = json.loads((ranks_dir / rank_module.RESULT_JSON).read_text())
        outputs = load_file(str(ranks_dir / rank_module.RESULT_TENSORS))
        return RanksResult(bench=dict(data["bench"]), ranks=list(data["ranks"]), outputs=outputs)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RankFailedError(f"the ranks all exited 0 but rank 0 left no readable result in {ranks_dir} "
                              f"({type(exc).__name__}: {exc}); see {ranks_dir / 'rank0.log'}.") from exc
