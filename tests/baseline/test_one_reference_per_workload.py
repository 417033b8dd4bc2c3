"""One reference per workload: a dtype sweep computes exactly one CPU reference, and a cached
reference of higher precision serves a job that asks for a lower one. The records show it:
``baseline.computed`` is true for exactly one job, every other job has ``cache_hit: true`` and the
precision that served it."""

from __future__ import annotations

import json

from helpers import TINY_RUN, run_app

SWEEP = ["-m", "model=tiny_flux2_decoder", *TINY_RUN, "preset.iters=1", "bench.flops.enabled=false",
         "baseline.process=in-process", "fail_on=null"]  # verdicts are not what these tests check


def _run(tmp_path, *overrides):
    cache = tmp_path / "cache"
    result = run_app([*SWEEP, *overrides, f"baseline.cache_dir={cache}"], cwd=tmp_path)
    assert result.returncode == 0, result.output[-3000:]
    records = [json.loads(p.read_text()) for p in result.job_dir.glob("*/record.json")]
    assert records and all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    return records, [p for p in cache.iterdir() if p.is_dir()]


def test_a_dtype_sweep_computes_exactly_one_reference(tmp_path):
    records, entries = _run(tmp_path, "dtype=float32,float16,bfloat16")
    dtypes = sorted(r["config"]["dtype"]["name"] for r in records)
    assert dtypes == ["bfloat16", "float16", "float32"]
    computed = [r["baseline"]["computed"] for r in records]
    assert computed.count(True) == 1, computed
    assert sorted(r["baseline"]["cache_hit"] for r in records) == [False, True, True]
    assert {r["baseline"]["precision"] for r in records} == {"float64"}
    assert len(entries) == 1 and {r["baseline"]["cache_key"] for r in records} == {entries[0].name}


def test_a_float64_reference_serves_the_float32_reference_request_that_follows_it(tmp_path):
    records, entries = _run(tmp_path, "dtype=float32", "baseline.reference=float64,float32")
    by_request = {r["config"]["baseline"]["reference"]: r["baseline"] for r in records}
    assert by_request["float64"]["computed"] is True
    served = by_request["float32"]
    assert (served["computed"], served["cache_hit"]) == (False, True)
    assert (served["requested_precision"], served["precision"]) == ("float32", "float64")
    assert served["cache_key"] == by_request["float64"]["cache_key"] != served["requested_key"]
    assert len(entries) == 1
