"""The profiler view (issue 15 item 3) on a tiny CPU model: table, totals, a trace that loads as JSON."""

from __future__ import annotations

import json
import time

import torch

from ascendbench.devices import DeviceAdapter
from ascendbench.job.profiling import ProfileRun, ProfileSettings, profile_calls


def _model_and_call():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.SiLU(),
                                torch.nn.Conv2d(32, 3, 3, padding=1))
    x = torch.randn(1, 3, 96, 96)
    return lambda: model(x)


def _median_ms(call, n=15):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return sorted(times)[n // 2]


def test_top_operators_add_up_to_the_measured_call_and_the_trace_is_json(tmp_path):
    call = _model_and_call()
    median = _median_ms(call)
    section = profile_calls(ProfileRun(call, DeviceAdapter("cpu"), ProfileSettings(calls=5, top=50), tmp_path, median))
    names = [row["name"] for row in section["top"]]
    assert any("conv" in n for n in names) and section["clock"] == "cpu"
    # every operator listed (top=50 > ops of this model): the rows add up to the per-call total exactly
    assert abs(sum(r["total_ms"] for r in section["top"]) - section["ops_total_ms_per_call"]) < 1e-9
    assert abs(sum(r["share"] for r in section["top"]) - 1.0) < 1e-9
    assert section["ops_over_median"] == section["ops_total_ms_per_call"] / median
    # same unit as the median (ms, not us): a loose bound, the 20 % figure is a benchmark's business
    assert 0.2 < section["ops_over_median"] < 5, section
    trace = json.loads((tmp_path / section["trace"]).read_text())
    assert trace["traceEvents"]


def test_no_trace_when_switched_off(tmp_path):
    section = profile_calls(ProfileRun(_model_and_call(), DeviceAdapter("cpu"), ProfileSettings(calls=1, trace=False),
                                       tmp_path))
    assert "trace" not in section and section["ops_over_median"] is None and not list(tmp_path.iterdir())
