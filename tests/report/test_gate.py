"""The --compare gate never passes on silence: nothing measured fails, missing workloads are listed,
bad noise values are usage errors (exit 2), distinct from "the gate failed" (exit 1)."""

from __future__ import annotations

import json

import pytest

from ascendbench.job.record import RecordWriter
from ascendbench.report.__main__ import main


@pytest.fixture
def old(write_record, tmp_path):
    """OLD: two measured workloads (float16 and float32)."""
    root = tmp_path / "old"
    write_record("a", root=root, dtype="float16", median_ms=100.0)
    write_record("b", root=root, dtype="float32", median_ms=300.0)
    return root


def _gate(old, new, capsys, *extra):
    status = main(["--compare", str(old), str(new), *extra])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _failed_early(job_dir):
    """A job that failed in its config stage: a record with no job fields."""
    writer = RecordWriter(job_dir, {"seed": 42})
    writer.finish("failed", ValueError("preset.batch_size=0 must be >= 1"), reason="config")


def test_compare_fails_when_new_is_empty(old, tmp_path, capsys):
    (tmp_path / "new").mkdir()
    status, out, _ = _gate(old, tmp_path / "new", capsys)
    assert status == 1
    assert "NEW measured nothing: none of its 0 record(s)" in out and "no regression" not in out


def test_compare_fails_when_new_holds_only_broken_records(old, tmp_path, capsys):
    for name, content in (("x", "{not json"),
                          ("y", json.dumps({"status": "ok", "metrics": "oops"}))):
        (tmp_path / "new" / name).mkdir(parents=True)
        (tmp_path / "new" / name / "record.json").write_text(content)
    status, out, _ = _gate(old, tmp_path / "new", capsys)
    assert status == 1 and "NEW measured nothing" in out
    assert out.count("unreadable record") == 2


def test_compare_fails_when_new_jobs_failed_before_their_fields_were_known(old, tmp_path, capsys):
    _failed_early(tmp_path / "new" / "a")
    _failed_early(tmp_path / "new" / "b")
    status, out, _ = _gate(old, tmp_path / "new", capsys)
    assert status == 1
    assert out.count("failed before its workload was known (ValueError: preset.batch_size=0") == 2


def test_compare_fails_when_new_is_a_dry_run(old, write_record, tmp_path, capsys):
    for name, dtype in (("a", "float16"), ("b", "float32")):
        path = write_record(name, root=tmp_path / "new", dtype=dtype)
        record = json.loads(path.read_text())
        record["plan"] = {"problems": []}
        record["bench"], record["metrics"], record["verdict"] = None, {}, None
        path.write_text(json.dumps(record))
    status, out, _ = _gate(old, tmp_path / "new", capsys)
    assert status == 1 and "NEW measured nothing" in out
    assert out.count("dry run (plans only, measures nothing)") == 2


def test_compare_lists_every_old_workload_missing_in_new(old, write_record, tmp_path, capsys):
    write_record("a", root=tmp_path / "new", dtype="float16", median_ms=100.0)
    _failed_early(tmp_path / "new" / "b")
    status, out, _ = _gate(old, tmp_path / "new", capsys)
    assert status == 1, "an OLD workload lost in NEW is not a pass"
    missing = "flux2_small_decoder npu float32 mini 512x512 b1"
    assert f"missing in NEW (OLD workloads NEW does not hold): {missing}" in out
    assert "1 OLD workload(s) missing in NEW" in out
    status, out, _ = _gate(old, tmp_path / "new", capsys, "--set", "compare.allow_missing=true")
    assert status == 0 and "missing in NEW" in out and "no regression" in out


@pytest.mark.parametrize("noise", ["-0.1", "nan", "inf", "-inf"])
def test_compare_noise_rejects_negative_nan_and_inf(old, tmp_path, capsys, noise):
    status, out, err = _gate(old, old, capsys, f"--noise={noise}")
    assert status == 2 and "compare.noise" in err and "finite fraction >= 0" in err
    assert out == "", "no comparison printed"


def test_compare_noise_abc_is_a_usage_error_exit_2_not_a_regression(old, capsys):
    status, _, err = _gate(old, old, capsys, "--set", "compare.noise=abc")
    assert status == 2 and "compare.noise='abc' is not allowed" in err
    status, _, err = _gate(old, old, capsys, "--set", "compare.allow_missing=maybe")
    assert status == 2 and "compare.allow_missing" in err


def test_compare_of_identical_measured_sets_still_passes(old, capsys):
    status, out, _ = _gate(old, old, capsys)
    assert status == 0
    assert "compared 2 workload(s)" in out
    assert out.rstrip().endswith("no regression")
