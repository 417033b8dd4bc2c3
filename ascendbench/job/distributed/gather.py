"""The ranks' figures folded into the job's one record.

The job's latency is the **synchronized** one: every timed call started at a barrier and ended at a barrier on
every rank (:func:`ascendbench.job.distributed.rank.synchronized`), so call *i* took, for the job, the longest of the
ranks' samples *i*; the statistics are over those per-call maxima. Memory is kept per rank (``memory_per_rank``,
plus the largest peak) because a card runs out on its own. The outputs are rank 0's; the other ranks' output
digests say whether every rank ended with the same result (``outputs_agree``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ascendbench.bench.stats import LatencyStats
from ascendbench.errors import RankFailedError
from ascendbench.job.distributed.settings import ParallelSettings

SYNC_CLOCK = ("barrier-synchronized: each timed call starts after a barrier and ends at a barrier on every rank; "
              "a call's time is the slowest rank's")


def synchronized_samples(ranks: Sequence[Mapping[str, Any]]) -> list[float]:
    """Per-call maxima over the ranks' host samples (ms).

    >>> synchronized_samples([{"rank": 0, "samples_ms": [1.0, 3.0]}, {"rank": 1, "samples_ms": [2.0, 2.5]}])
    [2.0, 3.0]

    Raises:
        RankFailedError: the ranks timed different numbers of calls (the fixed budget was not kept).
    """
    counts = {int(r["rank"]): len(r["samples_ms"]) for r in ranks}
    if len(set(counts.values())) != 1:
        raise RankFailedError(f"the ranks timed different numbers of calls ({counts}); a multi-card job needs the "
                              "same fixed count on every rank (bench.iters). Run it again; if it repeats, report it.")
    return [max(float(r["samples_ms"][i]) for r in ranks) for i in range(next(iter(counts.values())))]


def combine(bench: Mapping[str, Any], ranks: Sequence[Mapping[str, Any]],
            settings: ParallelSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(bench section, distributed section)`` of the record from rank 0's bench and every rank's figures."""
    ranks = sorted(ranks, key=lambda r: int(r["rank"]))
    samples = synchronized_samples(ranks)
    latency = LatencyStats.from_ms(samples)
    per_rank = [{"rank": int(r["rank"]), "device": r["device"], **_memory(r["memory"])} for r in ranks]
    merged = dict(bench)
    merged.update(latency=latency.to_dict(), samples_ms=samples, timer=SYNC_CLOCK,
                  memory_per_rank=per_rank, rank0_latency=bench.get("latency"))
    merged["memory"] = {**dict(bench.get("memory") or {}),
                        "max_rank_peak_allocated_mb": max(p["peak_allocated_mb"] for p in per_rank)}
    _throughput(merged, latency)
    digests = [r["outputs_sha256"] for r in ranks]
    section = {**settings.to_dict(), "clock": SYNC_CLOCK, "outputs_agree": all(d == digests[0] for d in digests),
               "peak_allocated_mb_by_rank": {str(p["rank"]): p["peak_allocated_mb"] for p in per_rank},
               "ranks": [{"rank": int(r["rank"]), "pid": r["pid"], "device": r["device"],
                          "device_name": r["device_name"], "median_ms": r["median_ms"], "cold_ms": r["cold_ms"],
                          "peak_allocated_mb": _memory(r["memory"])["peak_allocated_mb"],
                          "outputs_sha256": r["outputs_sha256"], "mode": r.get("mode")} for r in ranks]}
    return merged, section


def _memory(memory: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("peak_allocated_mb", "peak_reserved_mb", "peak_rss_mb", "scope")
    return {k: memory.get(k) for k in keys}


def _throughput(bench: dict[str, Any], latency: LatencyStats) -> None:
    throughput = dict(bench.get("throughput") or {})
    items = throughput.get("items_per_call")
    if items and latency.median_ms > 0:
        throughput["value"] = items / (latency.median_ms / 1e3)
    bench["throughput"] = throughput
