"""record.json is valid JSON at every stage and written atomically."""

from __future__ import annotations

import json

from ascendbench.job.record import RecordWriter, load_record, write_json_atomic


def test_nan_and_inf_become_valid_json(tmp_path):
    write_json_atomic(tmp_path / "r.json", {"a": float("nan"), "b": [float("inf"), -float("inf")], "c": 1.5})
    data = json.loads((tmp_path / "r.json").read_text())
    assert data == {"a": None, "b": ["inf", "-inf"], "c": 1.5}
    assert not list(tmp_path.glob(".*.tmp")), "temporary file left behind"


def test_writer_starts_running_and_finishes_with_the_error(tmp_path):
    writer = RecordWriter(tmp_path, {"seed": 42})
    writer.write()
    assert load_record(tmp_path)["status"] == "running"
    writer.finish("failed", ValueError("boom"), reason="unexpected")
    record = load_record(tmp_path / "record.json")
    assert record["status"] == "failed"
    assert record["error"] == {"type": "ValueError", "reason": "unexpected", "message": "boom"}
    assert record["timing"]["duration_s"] >= 0
