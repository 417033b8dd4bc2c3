"""Malformed records, bad output paths and dry runs: a broken row or a one-paragraph error, never a
traceback or a lost report; a dry run is labelled, not counted as a measured ok job."""

from __future__ import annotations

import json

import pytest

from ascendbench.report.__main__ import main
from ascendbench.report.gather import load_row
from ascendbench.report.summary import write_summary

DEEP = "[" * 100_000 + "]" * 100_000
MALFORMED = {
    "metrics_is_a_string": json.dumps({"status": "ok", "job": {"model": "m"}, "metrics": "oops"}),
    "number_too_large_for_float":
    '{"status": "ok", "job": {"model": "m"}, "bench": {"cold_ms": 1' + "0" * 400 + "}}",
    "deeply_nested_json": '{"status": "ok", "job": {"model": "m"}, "metrics": ' + DEEP + "}",
    "status_is_a_list": json.dumps({"status": ["ok"], "job": {"model": "m"}}),
    }


def _write(tmp_path, name, content):
    path = tmp_path / "records" / name / "record.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    return path


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_record_becomes_a_broken_row(tmp_path, case):
    row = load_row(_write(tmp_path, case, MALFORMED[case]))
    assert row["status"] == "broken", row
    assert row["error.message"]


@pytest.mark.parametrize("depth", [200, 900, 980])
def test_deeply_nested_section_never_raises(tmp_path, depth):
    nested = '{"a":' * depth + "1" + "}" * depth
    content = '{"status": "ok", "job": {"model": "m"}, "env": ' + nested + "}"
    row = load_row(_write(tmp_path, f"d{depth}", content))
    assert row["status"] in ("ok",
                             "broken"), "read, or a broken row saying why: never a RecursionError"


def test_record_whose_metrics_is_a_string_is_broken_with_the_reason(tmp_path):
    row = load_row(_write(tmp_path, "x", MALFORMED["metrics_is_a_string"]))
    assert "'metrics' is a str" in row["error.message"]


def test_number_too_large_for_float_is_broken_with_the_reason(tmp_path):
    row = load_row(_write(tmp_path, "x", MALFORMED["number_too_large_for_float"]))
    assert "too large for a float" in row["error.message"]


def test_report_over_every_malformed_record_is_written_with_broken_rows(write_record, tmp_path,
                                                                        capsys):
    write_record("good")
    for case, content in MALFORMED.items():
        _write(tmp_path, case, content)
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots"]) == 0
    text = (out / "report.md").read_text()
    failures = text.split("## Failed jobs\n", 1)[1].split("\n## ", 1)[0]
    assert failures.count("| broken |") == len(MALFORMED)
    assert f"{len(MALFORMED) + 1} record(s): {len(MALFORMED)} broken, 1 ok" in text
    _, md = write_summary(tmp_path / "records")[1:]
    assert md.read_text().count("| broken |") == len(MALFORMED), \
        "the sweep summary survives them too"


def test_out_pointing_at_a_file_is_a_usage_error(write_record, tmp_path, capsys):
    write_record("good")
    target = tmp_path / "report.md"
    target.write_text("keep me")
    assert main([str(tmp_path / "records"), "--out", str(target), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a directory" in err and str(target) in err and "Traceback" not in err
    assert target.read_text() == "keep me"


def test_dry_run_record_is_labelled_and_not_counted_as_ok(write_record, tmp_path):
    write_record("measured", dtype="float16")
    path = write_record("planned", dtype="float32")
    record = json.loads(path.read_text())
    record.update(plan={"problems": []}, bench=None, metrics={}, verdict=None)
    record["config"]["dry_run"] = True
    path.write_text(json.dumps(record))
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots"]) == 0
    text = (out / "report.md").read_text()
    assert "2 record(s): 1 dry-run, 1 ok" in text
    for section in ("Accuracy", "Performance"):
        body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
        assert "planned" not in body, f"a dry run is not a measured row of {section}"
    dry = text.split("## Dry runs\n", 1)[1].split("\n## ", 1)[0]
    assert "(../records/planned/record.json)" in dry and "| float32 |" in dry
    assert "| missing |" not in dry


@pytest.mark.parametrize("schema, warned", [(99, True), (1, False)])
def test_a_record_of_a_newer_schema_is_shown_with_a_warning_naming_it(write_record, caplog,
                                                                       schema, warned):
    """Before: read without a word, though its fields may mean something else."""
    path = write_record("future")
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "schema": schema}))
    with caplog.at_level("WARNING", logger="ascendbench.report.gather"):
        row = load_row(path)
    assert row["status"] == "ok"
    assert (f"{path} is a record of schema 99, newer than" in caplog.text) is warned
