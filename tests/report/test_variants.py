"""A/B variants: jobs of one workload differing only in settings, side by side.

Unit tests on synthetic records (flattened by the report's own ``record_row``), then the real
``+sweep=attention_backends`` multirun of the tiny LTX T2V twin, in this process, and its report.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ascendbench.report import fmt
from ascendbench.report.__main__ import main as report_main
from ascendbench.report.gather import record_row
from ascendbench.report.variants import patches_cell, variant_groups, variants_section

from helpers import run_app

SHOW = ["mean_rel_err", "cosine"]
BACKEND = "model.patches.0.backend"


def _record(backend: str = "_native_npu", median_ms: float = 10.0,
            started: str = "2026-01-01T10:00:00",
            **changes: Any) -> dict[str, Any]:
    """A finished T2V record; ``changes`` set dotted keys (``job.dtype``,
    ``config.device.allow_hf32`` ...)."""
    record = {
        "status": "ok", "verdict": "PASS",
        "job": {"model": "tiny_ltx_t2v", "task": "ascendbench.tasks.TextToVideoTask",
                "device": "npu",
                "dtype": "bfloat16", "preset": "mini", "seed": 42, "batch_size": 1, "height": 32,
                "width": 32,
                "num_frames": 9, "steps": 2},
        "weights": {"kind": "loaded", "digest": "sha256:" + "ab" * 32},
        "inputs": {"latents": {"sha256": "11" * 32}},
        "env": {"hostname": "host-a"},
        "timing": {"started_at": started, "finished_at": started},
        "metrics": {"mean_rel_err": {"value": 0.001, "verdict": "PASS", "rule": "<= 0.01"},
                    "cosine": {"value": 0.9999, "verdict": "PASS", "rule": ">= 0.99"}},
        "bench": {"latency": {"median_ms": median_ms}},
        "patches": {"device": [{"name": "diffusers_attention_backend",
                                "options": {"backend": backend},
                                "backend": backend, "models": ["LTXPipeline"]}]},
        "config": {"seed": 42, "model": {"name": "tiny_ltx_t2v", "patches": [
                       {"name": "diffusers_attention_backend", "backend": backend,
                        "devices": ["npu"]}]},
                   "device": {"name": "npu", "index": 0, "allow_hf32": False},
                   "preset": {"height": 32, "iters": 10}, "bench": {"iters": 10},
                   "baseline": {"cache_dir": "/cache/a"}},
    }
    for dotted, value in changes.items():
        _set(record, dotted, value)
    return record


def _set(record: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    node = record
    for part in path:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[last] = value


def _rows(*records: dict[str, Any]) -> list[dict[str, Any]]:
    return [record_row(copy.deepcopy(r), Path(f"/runs/{i}/record.json"))
            for i, r in enumerate(records)]


def test_two_backends_of_one_workload_are_one_group_with_the_latency_ratio():
    groups = variant_groups(_rows(_record("_native_npu", 10.0),
                                  _record("native", 25.0, "2026-01-01T10:05:00")))
    assert len(groups) == 1
    group = groups[0]
    assert group.keys == [BACKEND], "only the key that differs names the variant"
    assert ([v.label(group.keys) for v in group.variants]
            == [f"{BACKEND}=_native_npu", f"{BACKEND}=native"])
    assert ratio(group, group.variants[1]) == pytest.approx(2.5)
    assert ratio(group, group.baseline) == pytest.approx(1.0)


def test_the_baseline_is_the_variant_that_started_first_not_the_first_path():
    rows = _rows(_record("native", 30.0, "2026-01-01T11:00:00"),
                 _record("_native_npu", 10.0, "2026-01-01T10:00:00"))
    group = variant_groups(rows)[0]
    assert group.baseline.values[BACKEND] == "_native_npu"
    assert ratio(group, group.variants[1]) == pytest.approx(3.0)


def test_several_differing_keys_are_named_and_mirrors_left_out():
    other = _record("native", 20.0, "2026-01-01T10:05:00", **{"config.device.allow_hf32": True,
                                                               "config.preset.iters": 20,
                                                               "config.bench.iters": 20})
    group = variant_groups(_rows(_record(), other))[0]
    assert group.keys == ["device.allow_hf32", BACKEND], "a timing budget is no variant key"
    assert group.variants[1].label(group.keys) == f"device.allow_hf32=true, {BACKEND}=native"


def test_a_key_only_one_variant_sets_reads_unset():
    other = _record("native", **{"config.device.jit_compile": False})
    group = variant_groups(_rows(_record(), other))[0]
    assert "device.jit_compile" in group.keys
    assert group.baseline.label(["device.jit_compile"]) == "device.jit_compile=unset"


def ratio(group, variant):
    return fmt.latency(variant.row) / fmt.latency(group.baseline.row)


@pytest.mark.parametrize("dotted, value", [
    ("job.dtype", "float16"), ("job.height", 64), ("job.seed", 7), ("job.batch_size", 2),
    ("job.num_frames", 17),
    ("job.steps", 4), ("job.device", "cuda"), ("job.model", "tiny_ltx2_t2v"),
    ("job.task", "ascendbench.tasks.ImageToVideoTask"), ("weights.digest", "sha256:" + "cd" * 32),
    ("inputs.latents.sha256", "22" * 32), ("env.hostname", "host-b"),
    ])
def test_records_differing_in_a_workload_key_are_not_grouped(dotted, value):
    assert variant_groups(_rows(_record("_native_npu"), _record("native", **{dotted: value}))) == []


@pytest.mark.parametrize("dotted, value", [
    ("config.baseline.cache_dir", "/cache/b"), ("config.device.index", 1), ("config.seed", 42),
    ])
def test_keys_that_only_say_where_a_job_ran_make_no_variant(dotted, value):
    repeat = _record("_native_npu", 12.0, "2026-01-01T10:05:00", **{dotted: value})
    assert variant_groups(_rows(_record("_native_npu"), repeat)) == []


def test_a_repeated_variant_keeps_its_latest_record():
    rows = _rows(_record("_native_npu", 10.0, "2026-01-01T10:00:00"),
                 _record("native", 20.0, "2026-01-01T10:01:00"),
                 _record("_native_npu", 40.0, "2026-01-01T10:02:00"))
    group = variant_groups(rows)[0]
    assert len(group.variants) == 2 and group.baseline.row["record"] == "/runs/2/record.json"
    assert ratio(group, group.variants[1]) == pytest.approx(0.5)


def test_failed_and_dry_run_records_are_not_variants():
    failed = _record("native", status="failed")
    dry = _record("native", **{"config.dry_run": True})
    assert variant_groups(_rows(_record(), failed)) == []
    assert variant_groups(_rows(_record(), dry)) == []


def test_the_section_shows_variant_accuracy_latency_ratio_and_record(tmp_path):
    rows = _rows(_record("_native_npu", 10.0), _record("native", 25.0, "2026-01-01T10:05:00"))
    text = variants_section(rows, SHOW, tmp_path)
    assert "Variants differ in: `model.patches.0.backend`" in text
    assert ("| variant | device patches | mean_rel_err | cosine | verdict | median ms | latency / "
            "baseline |" in text)
    assert (f"| {BACKEND}=_native_npu | diffusers_attention_backend backend=_native_npu applied | "
            f"0.1% PASS" in text)
    assert ("| 10 | 1x (baseline) |" in text and "| 25 | 2.5x (untested: " in text
            and "no per-call samples" in text)
    assert text.count("record.json)") == 2
    assert "No A/B variants" in variants_section(rows[:1], SHOW, tmp_path)


def test_patches_cell_says_a_patch_was_skipped_on_this_device():
    record = _record(**{"patches.device.0.skipped": "not applied on cpu (devices: ['npu'])"})
    cell = patches_cell(_rows(record)[0])
    assert (cell
            == "diffusers_attention_backend backend=_native_npu skipped: not applied on cpu "
            "(devices: ['npu'])")


# -- end to end: the ready-made sweep on the tiny T2V twin, then the report ------------------------

FAST = ["model=tiny_ltx_t2v", "device=cpu", "preset.height=32", "preset.width=32", "preset.steps=2",
        "preset.warmup=0", "preset.iters=2", "baseline.process=in-process",
        "compare.visual.enabled=false",
        "bench.flops.enabled=false", "artifacts.media=false"]


def test_attention_backends_sweep_reports_two_variants_of_one_workload(tmp_path):
    sweep = tmp_path / "multirun" / "ab"
    result = run_app(["-m", "+sweep=attention_backends", *FAST], cwd=tmp_path, out_dir=sweep,
                     env={"ASCENDBENCH_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list(sweep.rglob("record.json"))) == 2

    assert report_main([str(sweep), "--out", str(tmp_path / "reports"), "--no-plots"]) == 0
    report = (tmp_path / "reports" / "report.md").read_text()
    section = report.split("## A/B variants", 1)[1].split("\n## ", 1)[0]
    assert section.count("\n### ") == 1, "one workload"
    assert ("### tiny_ltx_t2v (TextToVideoTask) on cpu float32, mini 32x32x9, 2 steps, batch 1, "
            "seed 42" in section)
    assert "Variants differ in: `model.patches.0.backend`" in section
    assert f"| {BACKEND}=_native_npu |" in section and f"| {BACKEND}=native |" in section
    assert "1x (baseline)" in section and section.count("record.json)") == 2
    ratio = [line for line in section.splitlines()
             if line.startswith(f"| {BACKEND}=native |")][0].split(" | ")[-2]
    assert "no significant difference" in ratio or "untested" in ratio, \
        "two calls a side prove no speed-up"
    for csv in (tmp_path / "reports" / "records.csv", sweep / "summary.csv"):
        assert "config" not in pd.read_csv(csv).columns, "the resolved configs stay in the records"


# -- planted faults: a ratio between unrelated jobs, noise sold as a speed-up ----------------------

def _samples(record: dict[str, Any], tmp_path: Path, name: str, samples: list[float]) -> dict[str,
                                                                                              Any]:
    """The record with its per-call samples written to ``<tmp>/<name>/record.json`` (the gate reads
    them there)."""
    import json
    import statistics

    record = copy.deepcopy(record)
    record["bench"] = {"latency": {"median_ms": statistics.median(samples), "count": len(samples)},
                       "samples_ms": samples}
    path = tmp_path / name / "record.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return record_row(record, path)


@pytest.mark.parametrize("dotted, value",
                         [("config.baseline.enabled", False),
                          ("config.baseline.reference", "float32"),
                          ("config.model.expect_digest", "sha256:" + "ef" * 32)])
def test_a_perf_only_smoke_run_is_no_baseline_of_an_attention_variant(dotted, value):
    smoke = _record("_native_npu", 120.0, **{dotted: value})
    assert variant_groups(_rows(smoke, _record("native", 10.0, "2026-01-01T10:05:00"))) == []


def test_overlapping_samples_read_no_significant_difference_not_a_ratio(tmp_path):
    noise = [10.0, 10.4, 9.7, 10.9, 9.5, 10.2, 10.8, 9.9, 10.1, 10.6]
    rows = [_samples(_record("_native_npu"), tmp_path, "a", noise),
            _samples(_record("native", started="2026-01-01T10:05:00"), tmp_path, "b",
                     [v * 0.99 for v in noise])]
    text = variants_section(rows, SHOW, tmp_path)
    assert "no significant difference" in text and "t on the intervals of OLD and NEW" in text
    slower = [_samples(_record("_native_npu"), tmp_path, "c", noise),
              _samples(_record("native", started="2026-01-01T10:05:00"), tmp_path, "d",
                       [v * 2 for v in noise])]
    assert "2x slower (`+100.0%" in variants_section(slower, SHOW, tmp_path), \
        "the gate's evidence quoted as it wrote it"
