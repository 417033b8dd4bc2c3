"""``bench.protocol=fixed``: exactly ``warmup`` warm-ups and ``iters`` timed calls, whatever the
time budget."""

from __future__ import annotations

import json

import pytest

from ascendbench.bench.budget import BenchBudget, StopRule, WarmupRule
from ascendbench.errors import ConfigError

# A time budget far too short for 20 calls: the adaptive protocol stops on it, the fixed one must
# not.
SHORT = {"warmup": 5, "iters": 20, "min_iters": 1, "max_iters": 100, "min_time_s": 0,
         "max_time_s": 1e-6, "warmup_max": 20, "precision": 0.01}


def test_the_fixed_protocol_is_not_cut_by_the_time_budget_nor_extended_by_the_warmup_rule():
    budget = BenchBudget.from_config({**SHORT, "protocol": "fixed"})
    stop, warm = StopRule(budget), WarmupRule(budget, cold_ms=100.0)
    for ms in (90.0, 80.0, 70.0, 60.0, 50.0):  # still getting faster: the adaptive rule would go on
        warm.add(ms)
    assert warm.reason() == "fixed"
    reasons = []
    for _ in range(20):
        stop.add(1.0)
        reasons.append(stop.reason(elapsed_s=10.0))
    assert reasons[:-1] == [None] * 19 and reasons[-1] == "max_iters"
    adaptive = StopRule(BenchBudget.from_config({**SHORT, "protocol": "adaptive"}))
    adaptive.add(1.0)
    # what cut preset.iters=20 to 16 or 19 calls
    assert adaptive.reason(elapsed_s=10.0) == "max_time_s"


def test_an_unknown_protocol_or_a_fixed_one_without_iters_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="bench.protocol='exact'.*adaptive, fixed"):
        BenchBudget.from_config({**SHORT, "protocol": "exact"})
    with pytest.raises(ConfigError, match="preset.iters=N"):
        BenchBudget.from_config({**SHORT, "iters": None, "protocol": "fixed"})


def test_a_fixed_protocol_job_records_exactly_5_warmups_and_20_timed_calls(cli):
    result, job = cli("model=tiny_flux2_decoder", "device=cpu", "preset.height=16",
                      "preset.width=16",
                      "baseline.enabled=false", "bench.protocol=fixed", "preset.warmup=5",
                      "preset.iters=20", "preset.max_time_s=0.001", "bench.flops.enabled=false")
    assert result.returncode == 0, result.stdout + result.stderr
    bench = json.loads((job / "record.json").read_text())["bench"]
    assert bench["warmup"]["calls"] == 5 and len(bench["warmup"]["calls_ms"]) == 5
    assert bench["latency"]["count"] == 20 and len(bench["samples_ms"]) == 20
    assert bench["stop"]["reason"] == "max_iters" and bench["stop"]["protocol"] == "fixed"
