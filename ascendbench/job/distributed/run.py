"""The device run stage's entry into a multi-card run: check the mode, run the ranks, fold their figures in."""


from __future__ import annotations

import logging
from typing import Any

from ascendbench.errors import ConfigError
from ascendbench.job.distributed import launcher  # the module: a rank imports the job stages, which import this
from ascendbench.job.distributed.gather import combine
from ascendbench.job.distributed.modes import context_parallel_refusal, denoiser_of, largest_block_list
from ascendbench.job.distributed.settings import ParallelSettings
from ascendbench.tasks.inputs import summarize

log = logging.getLogger(__name__)



def check_mode(settings: ParallelSettings, model: Any, device_type: str) -> None:
    """Refuse, before any rank starts, a mode the model or the device cannot run (``model`` may be on meta).

    Raises:
        ConfigError: cfg without a denoiser, device_map without a block list to place, context where diffusers or
            the device has no context parallelism.
    """
    if settings.mode == "cfg":
        denoiser_of(model)
    elif settings.mode == "device_map":
        largest_block_list(model)
    elif settings.mode == "context" and (why := context_parallel_refusal(device_type)) is not None:
        raise ConfigError(f"device.parallel=context cannot run on {device_type}: {why}. Run it on CUDA or NPU cards "
                          "(`device=cuda device.world_size=2`), or use `device.parallel=cfg` or `device_map` here.")


def run_distributed(job: Any, settings: ParallelSettings) -> dict[str, Any]:
    """The device run as ``settings.world_size`` ranks: sets ``job.outputs`` (rank 0's) and returns the record
    sections ``bench`` (synchronized latency, memory per rank), ``distributed`` and ``outputs``."""
    check_mode(settings, job.model, job.adapter.name)
    digest = (job.weights or {}).get("digest")
    result = launcher.run_ranks(job.cfg, job.dir, settings, digest,
                       on_start=lambda pids: job.record({"distributed": {**settings.to_dict(), "pids": pids}}))
    bench, section = combine(result.bench, result.ranks, settings)
    if not section["outputs_agree"]:
        job.warn(f"the {settings.world_size} ranks ended with different outputs (digests in distributed.ranks); the "
                 "record keeps rank 0's")
    job.outputs = dict(result.outputs)
    return {"bench": bench, "distributed": section, "outputs": summarize(job.outputs)}
