"""The port report carries report.md's caveats and one statistic per number: variants that did not
run are no differences, noisy rows are flagged, a ratio comes with the gate's answer, throughput
agrees with its latency column, a CPU's memory is the host's RSS, a cosine shows the seed's digits.
Each test plants the fault in records written by the real RecordWriter (conftest helpers)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ascendbench.job.failures import applied, config_for_record
from ascendbench.job.record import RecordWriter
from ascendbench.report.__main__ import main
from ascendbench.report.fmt import word

from helpers import compose_config
from helpers.seeds import tables

ALLOCATOR_WORDS = ("已分配", "已预留", "peak_allocated_mb", "memory allocated", "峰值显存占用")
CPU_SCOPE = "cpu device: no allocator statistics; device figures are the host process RSS"


def amend(path: Path, **sections: dict) -> Path:
    """Merge ``sections`` into the record's top-level sections (one level deep)."""
    record = json.loads(path.read_text())
    for key, value in sections.items():
        record[key] = {**(record.get(key) or {}), **value}
    path.write_text(json.dumps(record))
    return path


def port(tmp_path: Path, model: str, lang: str) -> str:
    out = tmp_path / f"port_{lang}"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", "--port", "--lang",
                 lang]) == 0
    return (out / "port" / f"{model}.md").read_text()


def _attention(path: Path, backend: str, skipped: bool, offload: bool, samples: list[float]):
    """A Sulphur-like job of the attention sweep: the patch asked, what the device run did with it
    and cpu_offload as asked (the pipeline's value in force is always false on the CPU)."""
    record = json.loads(path.read_text())
    record["config"]["model"].update(
        patches=[{"name": "diffusers_attention_backend", "backend": backend}],
        task={"cpu_offload": offload})
    entry = {"name": "diffusers_attention_backend", "options": {"backend": backend}}
    record["patches"] = {"device": [{**entry, "skipped": "not applied on cpu (devices: ['npu'])"}
                                   if skipped else entry]}
    record["pipeline"] = {"cpu_offload": False,
                          "patches_applied": [] if skipped else [entry["name"]]}
    record["bench"]["samples_ms"] = samples
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_variants_that_did_not_run_are_not_shown_as_differences(write_t2v_record, tmp_path, lang):
    steady = [3165.0 + (i % 5 - 2) for i in range(20)]
    for name, backend, offload in (("a", "_native_npu", True), ("b", "native", False)):
        _attention(write_t2v_record(name, calls=2), backend, skipped=True, offload=offload,
                   samples=steady)
    text = port(tmp_path, "tiny_ltx2_t2v", lang)
    assert not re.search(r"^- (variants|变体): ", text, re.MULTILINE), \
        "a skipped patch and the same offload in force sold as variants"
    noop = [line for line in text.splitlines()
            if line.startswith(("- not applied / same setting", "- 未生效 / 设置相同"))]
    not_applied = word("v_not_applied", lang)  # the value in force, in the report's language
    assert noop and all(f"model.patches.0.backend={not_applied}" in line
                        and "model.task.cpu_offload=false" in line for line in noop), noop
    assert "_native_npu" not in "\n".join(noop), "the value in force, not the value asked"


def test_a_variant_that_ran_gets_its_ratio_only_with_the_gates_answer(write_t2v_record, tmp_path):
    for name, backend in (("a", "_native_npu"), ("b", "native")):
        _attention(write_t2v_record(name, calls=2), backend, skipped=False, offload=False,
                   samples=[3165.0 + (i % 5 - 2) for i in range(20)])
    *_, line = [x for x in port(tmp_path, "tiny_ltx2_t2v", "en").splitlines()
                if x.startswith("- variants: ")]  # the performance section's
    assert "backend=_native_npu" in line and "backend=native" in line
    assert "no significant difference (1x" in line, line


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_noisy_row_is_flagged_in_the_port_as_in_report_md(write_record, tmp_path, lang):
    for name, noisy in (("fp32", True), ("fp16", False)):
        amend(write_record(name, dtype="float32" if noisy else "float16", baseline="skipped",
                           median_ms=100.0 if noisy else 17.0),
              bench={"noise": {"noisy": noisy, "iqr_over_median": 0.8 if noisy else 0.01}})
    text = port(tmp_path, "flux2_small_decoder", lang)
    [perf] = tables(text.replace("\n### ", "\n### x: ").replace("\n## ", "\n## x: "),
                    "Performance (batch x resolution)" if lang == "en" else "性能测试")
    assert "\n### 性能测试\n" not in text, "the zh section 性能测试 under its own name once"
    flag = "(noisy)" if lang == "en" else "(噪声大)"
    cells = {row[2]: row[3] for row in perf[1:]}
    assert cells["float32"].endswith(flag) and flag not in cells["float16"], cells
    report = (tmp_path / f"port_{lang}" / "report.md").read_text()
    assert "100 (noisy)" in report, "the flag's source: the same bench.noise.noisy as report.md"


def test_throughput_agrees_with_its_latency_column_within_one_percent(write_record, tmp_path):
    for batch in (1, 2):
        amend(write_record(f"b{batch}", batch=batch, baseline="skipped", median_ms=177.1),
              bench={"latency": {"count": 20, "median_ms": 177.1, "mean_ms": 559.9,
                                 "p90_ms": 900.0}})
    [perf] = tables(port(tmp_path, "flux2_small_decoder", "en").replace("\n### ", "\n### x: "),
                    "Performance (batch x resolution)")
    assert perf[0][3:6] == ["Mean (ms)", "P90 (ms)", "Throughput (samples/s)"]
    for row in perf[1:]:
        batch, mean, throughput = int(row[0]), float(row[3]), float(row[5])
        assert throughput == pytest.approx(batch * 1000 / mean, rel=0.01), row


def _layer_cpu(tmp_path: Path) -> None:
    writer = RecordWriter(tmp_path / "records" / "conv_in", {"seed": 42})
    writer.update(job={"model": "conv_in", "task": "ascendbench.tasks.LayerForwardTask",
                       "device": "cpu", "dtype": "float32", "preset": "mini", "batch_size": 1},
                  weights={"kind": "loaded", "digest": "sha256:ab"}, verdict="PASS",
                  bench={"cold_ms": 1.0, "latency": {"count": 5, "median_ms": 0.13,
                                                     "mean_ms": 0.14, "min_ms": 0.12,
                                                     "max_ms": 0.2, "p90_ms": 0.16,
                                                     "p95_ms": 0.16, "std_ms": 0.01},
                         "throughput": {"value": 7692.3, "unit": "calls/s"},
                         "memory": {"peak_allocated_mb": 738.0, "peak_reserved_mb": 738.0,
                                    "peak_rss_mb": 738.0, "scope": CPU_SCOPE}})
    writer.finish("ok")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("model", ["flux2_small_decoder", "conv_in"])
def test_a_cpu_jobs_memory_is_the_hosts_rss_never_the_allocators_words(write_record, tmp_path,
                                                                       lang, model):
    if model == "conv_in":
        _layer_cpu(tmp_path)
    else:
        amend(write_record("cpu", device="cpu", dtype="float32", baseline="skipped"),
              bench={"memory": {"peak_allocated_mb": 738.0, "peak_reserved_mb": 738.0,
                                "peak_rss_mb": 738.0, "scope": CPU_SCOPE}})
    text = port(tmp_path, model, lang)
    assert not [w for w in ALLOCATOR_WORDS if w in text], text
    assert ("host RSS" if lang == "en" else "主机 RSS") in text and "738" in text


@pytest.mark.parametrize("value, rule, shown", [
    (0.999998, ">= 0.99", "0.999998"),  # the seed's 6 decimals: "1" hides a dtype's difference
    (0.9999985, ">= 0.999999", None)])  # never printed on or above the bound it fails
def test_a_cosine_prints_the_seeds_digits_never_across_its_bound(write_record, tmp_path, value,
                                                                  rule, shown):
    bound = float(rule.split()[-1])
    amend(write_record("fp16", dtype="float16"), metrics={"cosine": {
        "value": value, "rule": rule, "threshold": bound,
        "verdict": "PASS" if value >= bound else "FAIL"}})
    [acc] = tables(port(tmp_path, "flux2_small_decoder", "en").replace("\n### ", "\n### x: "),
                   "Accuracy (metrics x dtypes)")
    cell = next(row[1] for row in acc if row[0] == "Cosine Similarity")
    assert cell == shown if shown else float(cell) < bound, cell


def test_the_records_config_carries_the_data_range_applied():
    cfg = compose_config(["metric.data_range=1.0"])
    regression = config_for_record(cfg)["metric"]["evaluators"]["regression"]
    assert regression["data_range"] == 1.0, "1.0 applied (MetricSuite), not the 2.0 asked"
    asked = compose_config()
    assert config_for_record(asked)["metric"]["evaluators"]["regression"]["data_range"] == 2.0
    assert applied({"metric": {"data_range": None}}) == {"metric": {"data_range": None}}
