"""The regression gate: worse verdicts or slower medians beyond the noise rule fail; identical inputs pass."""

from __future__ import annotations

from ascendbench.report.__main__ import main
from ascendbench.report.compare import compare_frames
from ascendbench.report.gather import records_frame


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
    assert main(["--compare", str(old), str(new), "--noise", "0.2"]) == 0, "within a 20% noise rule"


def test_changes_under_the_noise_rule_are_noise(write_record, tmp_path):
    old, new = _sides(write_record, tmp_path, {"median_ms": 102.9})
    assert not compare_frames(records_frame([old]), records_frame([new]), 0.03).failed


def test_worse_verdict_and_failed_job_are_regressions(write_record, tmp_path):
    old, new = _sides(write_record, tmp_path, {"mean_rel_err": 0.05})
    result = compare_frames(records_frame([old]), records_frame([new]), 0.03)
    assert [r[6:] for r in result.regressions] == [["verdict", "PASS", "FAIL"]]
    old2, new2 = _sides(write_record, tmp_path / "x", {"status": "failed"})
    result = compare_frames(records_frame([old2]), records_frame([new2]), 0.03)
    assert result.regressions[0][6] == "status" and "RuntimeError" in result.regressions[0][8]


def test_rows_only_on_one_side_are_listed_not_failed(write_record, tmp_path):
    old, new = _sides(write_record, tmp_path, {})
    write_record("c", root=new, dtype="bfloat16")
    result = compare_frames(records_frame([old]), records_frame([new]), 0.03)
    assert not result.failed and result.only_new == ["flux2_small_decoder npu bfloat16 mini 512x512 b1"]
    assert "only in NEW (not compared)" in result.text()
