"""The regression gate: worse verdicts or slower medians beyond the minimum effect fail; identical
inputs pass.

These records carry no per-call samples and no CIs: the medians alone decide
(tests/report/test_significance.py covers the significance test and the CI-overlap fallback)."""

from __future__ import annotations

from ascendbench.report.__main__ import main
from ascendbench.report.compare import compare_frames
from ascendbench.report.gather import records_frame
from ascendbench.report.significance import LatencyRule

RULE = LatencyRule(min_effect=0.03)


def _sides(write_record, tmp_path, new_fields):
    old, new = tmp_path / "old", tmp_path / "new"
    base = dict(dtype="float16", median_ms=100.0, mean_rel_err=0.005)
    write_record("a", root=old, **base)
    write_record("b", root=old, **{**base, "dtype": "float32"})
    write_record("a", root=new, **{**base, **new_fields})
    write_record("b", root=new, **{**base, "dtype": "float32"})
    return old, new


def test_identical_inputs_pass(write_record, tmp_path, capsys):
    old, new = _sides(write_record, tmp_path, {})
    assert main(["--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "compared 2 workload(s)" in out and "no regression" in out


def test_planted_latency_regression_is_flagged(write_record, tmp_path, capsys):
    old, new = _sides(write_record, tmp_path, {"median_ms": 110.0})
    assert main(["--compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "| median latency | 100 ms | 110 ms (+10.0%) |" in out
    assert "medians only" in out, "no samples: the line says the medians alone decided"
    assert main(["--compare", str(old), str(new), "--min-effect",
                 "0.2"]) == 0, "within a 20% minimum effect"
    assert main(["--compare", str(old), str(new), "--noise",
                 "0.2"]) == 0, "--noise: deprecated alias of --min-effect"


def test_changes_within_the_minimum_effect_are_noise(write_record, tmp_path):
    old, new = _sides(write_record, tmp_path, {"median_ms": 102.9})
    assert not compare_frames(records_frame([old]), records_frame([new]), RULE).failed


def test_worse_verdict_and_failed_job_are_regressions(write_record, tmp_path):
    old, new = _sides(write_record, tmp_path, {"mean_rel_err": 0.05})
    result = compare_frames(records_frame([old]), records_frame([new]), RULE)
    assert [r[6:] for r in result.regressions] == [["verdict", "PASS", "FAIL"]]
    old2, new2 = _sides(write_record, tmp_path / "x", {"status": "failed"})
    result = compare_frames(records_frame([old2]), records_frame([new2]), RULE)
    assert result.regressions[0][6] == "status" and "RuntimeError" in result.regressions[0][8]


def test_rows_only_on_one_side_are_listed_not_failed(write_record, tmp_path):
    old, new = _sides(write_record, tmp_path, {})
    write_record("c", root=new, dtype="bfloat16")
    result = compare_frames(records_frame([old]), records_frame([new]), RULE)
    assert not result.failed
    assert result.only_new == ["flux2_small_decoder npu bfloat16 mini 512x512 b1"]
    assert "only in NEW (not compared)" in result.text()


def _strip(record_path, edit) -> None:
    import json

    record = json.loads(record_path.read_text())
    edit(record)
    record_path.write_text(json.dumps(record))


def test_silence_in_new_is_no_pass(write_record, tmp_path, capsys):
    edits = {"no accuracy verdict": lambda r: r.update(verdict=None, metrics={}),
             "nan latency": lambda r: r["bench"]["latency"].update(median_ms=float("nan")),
             "no bench section": lambda r: r.pop("bench")}
    for what, edit in edits.items():
        old, new = _sides(write_record, tmp_path / what.replace(" ", "_"), {})
        _strip(new / "a" / "record.json", edit)
        assert main(["--compare", str(old), str(new)]) == 1, what
        out = capsys.readouterr().out
        assert "gate FAILED" in out and "1 regression(s)" in out, what
        said = "none (accuracy not judged)" if what == "no accuracy verdict" else "not measured"
        assert said in out, what


def test_a_new_verdict_edited_to_pass_over_a_failing_metric_is_a_regression(write_record, tmp_path):
    old, new = _sides(write_record, tmp_path, {})
    _strip(new / "a" / "record.json", lambda r: r["metrics"]["mean_rel_err"].update(verdict="FAIL"))
    result = compare_frames(records_frame([old]), records_frame([new]), RULE)
    assert [r[6:] for r in result.regressions] == [["verdict", "PASS", "FAIL"]]
