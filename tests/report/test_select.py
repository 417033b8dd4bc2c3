"""Which records feed which table: --select, perf-only runs kept out of accuracy, one row per
workload."""

from __future__ import annotations

import pytest

from ascendbench.errors import ReportError
from ascendbench.report.__main__ import main
from ascendbench.report.select import parse_selection


def _report(tmp_path, *extra):
    out = tmp_path / "reports"
    assert main([str(tmp_path / "multirun"), "--out", str(out), "--no-plots", *extra]) == 0
    return (out / "report.md").read_text()


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.fixture
def recipe(write_record, tmp_path):
    """A README recipe's runs in one multirun/: an accuracy sweep (fp16 run twice), a perf-only
    sweep."""
    acc, perf = tmp_path / "multirun" / "flux2_accuracy", tmp_path / "multirun" / "flux2_perf"
    write_record("fp16", root=acc, dtype="float16", mean_rel_err=0.0078)
    write_record("fp16_again", root=acc, dtype="float16", mean_rel_err=0.0079)
    write_record("bf16", root=acc, dtype="bfloat16", mean_rel_err=0.0733)
    for batch in (1, 2, 4):
        write_record(f"b{batch}", root=perf, dtype="float16", batch=batch, baseline="skipped")
    return tmp_path


def test_perf_only_runs_stay_out_of_the_accuracy_table_and_repeats_are_one_row(recipe):
    accuracy = _section(_report(recipe), "Accuracy")
    assert "flux2_perf" not in accuracy and "no baseline" not in accuracy
    rows = [line for line in accuracy.splitlines()
            if line.startswith(("| float16 |", "| bfloat16 |"))]
    # float16 (latest of two) and bfloat16 (device npu in every row: a note)
    assert len(rows) == 2, rows
    assert "fp16_again/record.json" in accuracy and "fp16/record.json" not in accuracy
    assert "2 row(s) stand for 3 records" in accuracy


def test_the_seed_per_resolution_layout_is_not_shown_for_an_image_decoder(recipe):
    section = _section(_report(recipe), "Accuracy per resolution (Sulphur-2 seed layout)")
    assert "does not apply to these records" in section


def test_select_by_sweep_and_dtype(recipe):
    perf = _section(_report(recipe, "--select", "sweep=flux2_perf"), "Performance")
    assert "flux2_perf" in perf and "flux2_accuracy" not in perf
    accuracy = _section(_report(recipe, "--select", "sweep=flux2_accuracy", "--select",
                                "dtype=bfloat16"), "Accuracy")
    assert "bf16/record.json" in accuracy and "fp16" not in accuracy


def test_a_bad_selection_says_how_to_write_one(recipe, capsys):
    with pytest.raises(ReportError, match="sweep=flux2_accuracy"):
        parse_selection(["dtype"])
    assert main([str(recipe / "multirun"), "--out", str(recipe / "r"), "--select",
                 "colour=red"]) == 2
    assert "colour" in capsys.readouterr().err


def test_the_sections_of_the_report_are_a_choice(recipe, capsys):
    text = _report(recipe, "--set", "sections=[seed_layouts,failures]")
    assert ([line for line in text.splitlines() if line.startswith("## ")]
            == ["## Seed layouts", "## Failed jobs"])
    assert main([str(recipe / "multirun"), "--out", str(recipe / "r"), "--set",
                 "sections=[colours]"]) == 2
    assert "colours" in capsys.readouterr().err


def test_an_accuracy_run_and_a_perf_only_run_of_one_workload_are_one_performance_row(recipe):
    """The recipe's fp16 batch-1 workload ran twice for accuracy and once perf-only: one row, the
    latest."""
    performance = _section(_report(recipe), "Performance")
    rows = [line for line in performance.splitlines()
            if line.startswith("| float16 | mini @ 512x512 | 1 |")]
    assert len(rows) == 1, rows
    assert "4 row(s) stand for 6 records" in performance
    bf16 = [line for line in performance.splitlines() if line.startswith("| bfloat16 |")]
    assert len(bf16) == 1, "another dtype is another workload"


def test_the_latest_record_is_the_latest_moment_not_the_latest_local_time_text(write_record):
    """Two runs of one workload on hosts in different time zones: the one that finished later in
    absolute time is the row shown, although its local-time text sorts first."""
    import json

    from ascendbench.report.gather import load_row
    from ascendbench.report.select import accuracy_rows

    stamps = {"beijing": "2026-12-01T16:00:00+0800",
              "utc": "2026-12-01T09:00:00+0000"}  # 08:00 and 09:00 UTC
    rows = []
    for name, stamp in stamps.items():
        path = write_record(name, mean_rel_err=0.005 if name == "utc" else 0.009)
        record = json.loads(path.read_text())
        record["timing"].update(started_at=stamp, finished_at=stamp)
        path.write_text(json.dumps(record))
        rows.append(load_row(path))
    shown = accuracy_rows(rows)
    assert len(shown) == 1 and shown[0]["record"].endswith("utc/record.json")
