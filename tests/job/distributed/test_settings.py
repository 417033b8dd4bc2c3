"""The parallel keys, the block slices and the fold of the ranks' figures into one record."""

from __future__ import annotations

import pytest

from ascendbench.errors import ConfigError, RankFailedError
from ascendbench.job.distributed.modes import (
    BACKENDS,
    ParallelSettings,
    check_mode,
    parallel_settings,
    slices,
)
from ascendbench.job.distributed.ranks import SYNC_CLOCK, combine, synchronized_samples


@pytest.mark.parametrize("device, backend", [("cpu", "gloo"), ("cuda", "nccl"), ("npu", "hccl")])
def test_backend_follows_the_device_type(device, backend):
    settings = parallel_settings({"world_size": 2, "parallel": "cfg"}, device)
    assert (settings.backend, settings.multi, settings.world_size) == (backend, True, 2)
    assert BACKENDS[device] == backend


@pytest.mark.parametrize("node, named", [
    ({"world_size": 0}, "device.world_size=0"),
    ({"world_size": 2, "parallel": "pipeline"}, "device.parallel='pipeline'"),
    ({"world_size": 1, "parallel": "cfg"}, "device.world_size=1"),
    ({"world_size": 2, "parallel": "none"}, "device.world_size=2"),
    ({"world_size": 3, "parallel": "cfg"}, "exactly 2 ranks"),
    ({"world_size": 2, "parallel": "cfg", "dist": {"backend": "mpi"}}, "device.dist.backend='mpi'"),
    ({"world_size": "two"}, "device.world_size='two'"),
])
def test_bad_parallel_keys_are_refused_naming_the_key(node, named):
    with pytest.raises(ConfigError) as caught:
        parallel_settings(node, "cpu")
    assert named in str(caught.value)


def test_one_card_is_not_multi():
    assert not parallel_settings({}, "cpu").multi


def test_slices_cover_every_block_once():
    assert slices(5, 2) == [range(0, 3), range(3, 5)]
    assert [i for part in slices(7, 3) for i in part] == list(range(7))
    with pytest.raises(ConfigError, match="1 block"):
        slices(1, 2)


def test_context_parallel_is_refused_on_the_cpu_with_the_reason():
    with pytest.raises(ConfigError, match="no CPU path"):
        check_mode(ParallelSettings(world_size=2, mode="context"), None, "cpu")


def _rank(rank, samples, digest="a"):
    return {"rank": rank, "pid": 10 + rank, "device": "cpu", "device_name": "host", "cold_ms": 5.0,
            "median_ms": sorted(samples)[len(samples) // 2], "samples_ms": samples,
            "mode": {"name": "cfg"},
            "memory": {"peak_allocated_mb": 100.0 + rank, "peak_reserved_mb": 1.0,
                       "peak_rss_mb": 1.0, "scope": "x"},
            "outputs_sha256": {"video": digest}}


def test_the_job_latency_is_the_slowest_rank_per_call():
    settings = parallel_settings({"world_size": 2, "parallel": "cfg"}, "cpu")
    bench = {"latency": {"median_ms": 1.0}, "memory": {}, "throughput": {"items_per_call": 9}}
    merged, section = combine(bench, [_rank(1, [2.0, 2.0, 9.0]), _rank(0, [3.0, 1.0, 1.0])],
                              settings)
    assert merged["samples_ms"] == [3.0, 2.0, 9.0] and merged["latency"]["median_ms"] == 3.0
    assert merged["timer"] == SYNC_CLOCK and section["clock"] == SYNC_CLOCK
    assert [r["peak_allocated_mb"] for r in merged["memory_per_rank"]] == [100.0, 101.0]
    assert merged["memory"]["max_rank_peak_allocated_mb"] == 101.0
    assert merged["throughput"]["value"] == pytest.approx(9 / 3e-3)
    assert section["outputs_agree"] and (section["world_size"], section["backend"]) == (2, "gloo")


def test_ranks_with_different_outputs_do_not_agree():
    settings = parallel_settings({"world_size": 2, "parallel": "cfg"}, "cpu")
    _, section = combine({"memory": {}}, [_rank(0, [1.0]), _rank(1, [1.0], digest="b")], settings)
    assert section["outputs_agree"] is False


def test_ranks_that_timed_different_counts_fail():
    with pytest.raises(RankFailedError, match="different numbers of calls"):
        synchronized_samples([_rank(0, [1.0, 2.0]), _rank(1, [1.0])])
