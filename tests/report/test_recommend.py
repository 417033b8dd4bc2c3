"""The dtype recommendation follows the stated rule, from verdicts and latencies only."""

from __future__ import annotations

from ascendbench.report.gather import load_row
from ascendbench.report.recommend import RULE, classify, recommend_device, recommendation_section


def _rows(write_record, specs):
    return [load_row(write_record(name, **fields)) for name, fields in specs.items()]


def _choices(text):
    return {line.split(" | ")[0].strip("| "): line.split(" | ")[1]
            for line in text.splitlines()[2:]}


def test_the_seed_table_fastest_passing_most_accurate_and_failing(write_record, tmp_path):
    rows = _rows(write_record, {
        "fp32": dict(dtype="float32", mean_rel_err=0.0024, median_ms=350.0),
        "fp16": dict(dtype="float16", mean_rel_err=0.0078, median_ms=92.0),
        "bf16": dict(dtype="bfloat16", mean_rel_err=0.0733, median_ms=90.0),
        })
    text = recommend_device(rows, "mean_rel_err", tmp_path)
    choices = _choices(text)
    assert choices["recommended (passes, fastest)"] == "float16"
    assert choices["most accurate"] == "float32"
    assert choices["not recommended"] == "bfloat16"
    assert "median 92 ms vs float32 350 ms" in text
    assert "mean_rel_err 7.33% > 1% (mini 512x512 b1)" in text


def test_speed_is_compared_only_on_common_workloads(write_record, tmp_path):
    rows = _rows(write_record, {
        "fp32_512": dict(dtype="float32", median_ms=100.0),
        "fp16_512": dict(dtype="float16", median_ms=50.0),
        "fp32_1024": dict(dtype="float32", height=1024, width=1024,
                          median_ms=400.0),  # fp16 has no 1024 run
    })
    text = recommend_device(rows, "mean_rel_err", tmp_path)
    assert "median 50 ms vs float32 100 ms (geometric mean over 1 common workload(s))" in text


def test_no_common_workload_and_nothing_passing_say_so(write_record, tmp_path):
    apart = _rows(write_record,
                  {"a": dict(dtype="float32", batch=1), "b": dict(dtype="float16", batch=2)})
    assert "share no measured workload" in recommend_device(apart, "mean_rel_err", tmp_path)
    failing = _rows(write_record, {"c": dict(dtype="bfloat16", mean_rel_err=0.5)})
    text = recommend_device(failing, "mean_rel_err", tmp_path)
    assert ("no dtype passed its accuracy verdicts" in text and _choices(text)["not recommended"]
            == "bfloat16")


def test_perf_only_dtypes_are_not_judged(write_record, tmp_path):
    rows = _rows(write_record, {"p": dict(dtype="float16", baseline="skipped")})
    assert classify(rows) == "unjudged"
    assert _choices(recommend_device(rows, "mean_rel_err", tmp_path))["not judged"] == "float16"


def test_section_states_the_rule_and_labels_random_init(write_record, tmp_path):
    rows = _rows(write_record,
                 {"t": dict(model="tiny", device="cpu", dtype="float32", weights="random")})
    text = recommendation_section(rows, ["tiny"], "mean_rel_err", tmp_path)
    assert text.startswith(RULE.format(metric="mean_rel_err"))
    assert "### tiny on cpu" in text and "float32 †" in text and "random-init weights" in text


def test_random_init_and_loaded_records_of_one_model_are_never_one_recommendation(write_record,
                                                                                  tmp_path):
    from ascendbench.report.gather import load_row
    from ascendbench.report.recommend import recommendation_section

    rows = [load_row(write_record("loaded", dtype="float32", mean_rel_err=0.002)),
            load_row(write_record("random", dtype="float16", mean_rel_err=0.05, weights="random"))]
    text = recommendation_section(rows, ["flux2_small_decoder"], "mean_rel_err", tmp_path)
    assert "on npu, loaded weights" in text and "on npu, random-init weights" in text
