"""The dry run's memory of a multi-card job, rank by rank (``dry_run=true device.world_size=N``).

From the single-card estimate (parameters and the activation peak of a meta-device run of the task):

* ``cfg``: every rank holds the whole pipeline and decodes the whole video; its denoiser sees half the batch.
  The single-card activation peak is kept (an upper bound: the decoder's peak is the same on both ranks).
* ``device_map``: a rank holds everything but the placed block list, plus its own slice of the blocks.
* ``context``: every rank holds the whole denoiser; the sequence (and with it the attention activations) is
  split over the ranks: the activation peak divided by the world size (an estimate).

On the CPU every rank is a process of the same host, so the ranks' sum must fit the host as well.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ascendbench.job.distributed.modes import largest_block_list, slices
from ascendbench.job.distributed.settings import ParallelSettings
from ascendbench.job.planning import memory_line
from ascendbench.job.resources import RunMemory


def rank_memory(settings: ParallelSettings, model: Any, single: RunMemory) -> list[RunMemory]:
    """Each rank's parameters and activation peak (see the module docstring), rank 0 first."""
    if settings.mode == "device_map":
        _, blocks = largest_block_list(model)
        counts = [sum(p.numel() for p in block.parameters()) for block in blocks]
        shared = single.num_params - sum(counts)
        return [replace(single, num_params=shared + sum(counts[i] for i in part),
                        activation_note=f"{single.activation_note}; blocks {part.start}:{part.stop} of the placed list")
                for part in slices(len(counts), settings.world_size)]
    if settings.mode == "context" and single.activations is not None:
        split = replace(single, activations=single.activations // settings.world_size,
                        activation_note=f"{single.activation_note}, divided over {settings.world_size} ranks "
                                        "(the sequence split)")
        return [split] * settings.world_size
    return [single] * settings.world_size


def ranks_plan(job: Any, settings: ParallelSettings, single: RunMemory, free: int) -> dict[str, Any]:
    """The plan's ``memory.device_run`` of a multi-card job: the rank that needs the most (the headline fields of
    a one-card plan), one line per rank against its card's free memory (``per_rank``) and, on the CPU, the ranks
    together against the host's (``host``)."""
    needs = rank_memory(settings, job.model, single)
    lines = [memory_line(job, f"rank {r} of {settings.world_size} ({settings.mode}) on {job.adapter.name} in "
                         f"{job.precision.name}", need, free) for r, need in enumerate(needs)]
    largest = max(lines, key=lambda line: line["need_mb"])  # the plan's headline: the rank that needs the most
    plan: dict[str, Any] = {**largest, **settings.to_dict(), "per_rank": lines}
    if job.adapter.name == "cpu":
        plan["host"] = memory_line(job, f"all {settings.world_size} ranks on the host",
                                   sum(n.total for n in needs), free)
    return plan
