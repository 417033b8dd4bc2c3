"""The performance lines of the summary, built from a record's bench section only."""

from __future__ import annotations

import doctest

from ascendbench.bench import summary
from ascendbench.bench.flops import FlopCount, flops_section
from ascendbench.bench.stats import LatencyStats, noise_verdict
from ascendbench.bench.summary import bench_lines, stop_cell, stop_text


def section(samples_ms, uncounted=None, phases=None, cpu=False):
    stats = LatencyStats.from_ms(samples_ms)
    count = FlopCount(flops=int(2e12), by_op={"aten.mm": int(2e12)}, uncounted_ops=uncounted or {})
    memory = ({"peak_allocated_mb": 900.0, "peak_reserved_mb": 900.0, "peak_rss_mb": 900.0,
               "scope": "cpu device: ..."}
              if cpu else {"peak_allocated_mb": 512.0, "peak_reserved_mb": 640.0,
                           "peak_rss_mb": 2048.0, "scope": "npu:0 caching allocator"})
    return {
        "cold_ms": 105.0, "latency": stats.to_dict(),
        "event_latency": LatencyStats.from_ms([v - 0.01 for v in samples_ms]).to_dict(),
        "throughput": {"value": 1000.0 / stats.median_ms, "unit": "images/s", "items_per_call": 1},
        "memory": memory, "noise": noise_verdict(stats, 0.10),
        "stop": {"reason": "precision", "ci_rel_half_width": 0.0049, "precision": 0.01},
        "flops": flops_section(count, stats.median_ms,
                               {"tflops": 245.76, "entry": "Ascend910B4", "source": "s"},
                               "bfloat16"),
        **({"phases": phases} if phases else {}),
    }


def test_docstring_examples_hold():
    assert doctest.testmod(summary).failed == 0


def test_quiet_run_prints_median_ci_cold_mfu_and_memory():
    lines = bench_lines(section([20.0, 20.1, 19.9, 20.0, 20.05, 20.02, 19.98]))
    text = "\n".join(lines)
    assert lines[0].startswith("latency   median 20 ms [95% CI 19.95-20.05]")
    assert "cold 105 ms" in lines[0]
    assert "stop: precision, CI +-0.5% (target 1%))" in lines[0] and "p99" in lines[0]
    assert "events median" in lines[1] and "MFU 40.7% of 245.8 (Ascend910B4)" in lines[1]
    assert "peak_reserved_mb 640" in lines[2] and "npu:0 caching allocator" in lines[2]
    assert "warning" not in text


def test_noisy_run_ends_with_the_noise_warning():
    lines = bench_lines(section([10.0, 14.0, 8.0, 12.0, 9.0, 15.0]))
    assert lines[-1].startswith("warning   noisy timing: IQR/median")


def test_uncounted_ops_turn_mfu_into_a_lower_bound():
    lines = bench_lines(section([20.0] * 6, uncounted={"npu.npu_fusion_attention": 40}))
    assert "MFU >= " in lines[1] and "not counted: npu.npu_fusion_attention" in lines[1]


def test_cpu_memory_is_shown_once_and_phases_get_a_line():
    phases = {"text_encoding": {"per_call": 1.0, "median_ms": 12.0, "total_median_ms": 12.0,
                                "share": 0.1},
              "step": {"per_call": 50.0, "median_ms": 2.0, "total_median_ms": 100.0, "share": 0.8}}
    lines = bench_lines(section([20.0] * 6, phases=phases, cpu=True))
    assert lines[2].startswith("memory    peak_rss_mb 900  (cpu device")
    assert lines[3] == "phases    text_encoding 12 ms 10%  step 100 ms 80% (50 x 2 ms)"


def test_warmup_calls_get_a_line_with_why_the_warmup_ended():
    bench = section([20.0] * 6)
    bench["warmup"] = {"calls": 3, "calls_ms": [512.0, 31.25, 20.5], "reason": "plateau"}
    lines = bench_lines(bench)
    assert "warm-up   3 call(s), plateau: 512, 31.25, 20.5 ms" in lines
    bench["warmup"] = {"calls": 0, "calls_ms": [], "reason": "fixed"}
    assert not [line for line in bench_lines(bench) if line.startswith("warm-up")]


def test_stop_text_and_the_flat_row_cell_of_the_sweep_summary():
    assert stop_text("max_time_s", 0.034, 0.01) == "max_time_s, CI +-3.4% (target 1%)"
    assert stop_text("min_reached", None, None) == "min_reached"
    assert stop_text(None) == "n/a" and stop_text(float("nan")) == "n/a"
    row = {"bench.stop.reason": "precision", "bench.stop.ci_rel_half_width": 0.0093,
           "bench.stop.precision": 0.01}
    assert stop_cell(row) == "precision, CI +-0.9% (target 1%)"
    assert stop_cell({"bench.stop.reason": "max_iters",
                      "bench.stop.ci_rel_half_width": float("nan"),
                      "bench.stop.precision": float("nan")}) == "max_iters"


def test_an_unknown_chip_is_named_where_the_mfu_would_be():
    from ascendbench.bench.peak import peak_tflops

    bench = section([20.0] * 6)
    count = FlopCount(flops=int(2e12))
    bench["flops"] = flops_section(count, 20.0,
                                   peak_tflops({"table": {}}, "Ascend910_9999", "bfloat16"),
                                   "bfloat16")
    assert "MFU n/a (unknown device 'Ascend910_9999'" in bench_lines(bench)[1]
