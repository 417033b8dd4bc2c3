"""One job end to end through the CLI (in this process): the record's bench section and the
summary's performance lines."""

from __future__ import annotations

import json


def test_adaptive_budget_job_records_the_full_bench_section(cli):
    result, job = cli("model=tiny_flux2_decoder", "device=cpu", "preset.height=32",
                      "preset.width=32", "baseline.enabled=false", "bench.warmup=0",
                      "bench.min_iters=6", "bench.max_iters=8", "bench.min_time_s=0",
                      "device.peak.override.float32=1.5", "device.deterministic=true")
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads((job / "record.json").read_text())
    bench = record["bench"]
    assert 6 <= bench["latency"]["count"] <= 8
    assert bench["stop"]["reason"] in ("precision", "max_iters")
    assert bench["stop"]["max_iters"] == 8 and bench["cold_ms"] > 0
    assert bench["event_latency"] is None, "the CPU has no device events"
    assert bench["flops"]["per_call"] > 0
    assert bench["flops"]["peak_tflops"] == 1.5
    assert bench["flops"]["mfu"] > 0
    assert bench["placement"]["module_mb"] > 0 and "peak_rss_mb" in bench["memory"]
    assert set(bench["noise"]) == {"iqr_over_median", "threshold", "noisy", "warning",
                                   "runs_warning"}
    assert set(bench["interval"]) == {"low_ms", "high_ms", "rel_half_width", "used", "se_log",
                                      "dof", "own_rel_half_width", "blocks"}
    assert sum(bench["interval"]["blocks"]["calls"]) == bench["latency"]["count"]
    assert record["env"]["device"]["deterministic"] is True
    assert "OMP_NUM_THREADS" in record["env"]["device"]["env_observed"]
    assert "latency   median" in result.stdout
    assert "GFLOP/call" in result.stdout
    assert "MFU" in result.stdout
