"""record.json is valid JSON at every stage and written atomically."""

from __future__ import annotations

import json

from ascendbench.job.record import RecordWriter, write_json_atomic

from helpers import read_record


def test_nan_and_inf_become_valid_json(tmp_path):
    write_json_atomic(tmp_path / "r.json",
                      {"a": float("nan"), "b": [float("inf"), -float("inf")], "c": 1.5})
    data = json.loads((tmp_path / "r.json").read_text())
    assert data == {"a": None, "b": ["inf", "-inf"], "c": 1.5}
    assert not list(tmp_path.glob(".*.tmp")), "temporary file left behind"


def test_writer_starts_running_and_finishes_with_the_error(tmp_path):
    writer = RecordWriter(tmp_path, {"seed": 42})
    writer.write()
    assert read_record(tmp_path)["status"] == "running"
    writer.finish("failed", ValueError("boom"), reason="unexpected")
    record = read_record(tmp_path)
    assert record["status"] == "failed"
    assert record["error"] == {"type": "ValueError", "reason": "unexpected", "message": "boom"}
    assert record["timing"]["duration_s"] >= 0


def test_a_failed_record_keeps_no_verdict(tmp_path):
    writer = RecordWriter(tmp_path, {"seed": 1})
    writer.update(verdict="PASS")
    writer.finish("failed", OSError("disk full while saving artifacts"), reason="write")
    record = read_record(tmp_path)
    assert record["status"] == "failed"
    assert record["verdict"] is None, "a failed job must not read as PASS"
    assert record["error"]["verdict_before_failure"] == "PASS"


def test_a_record_that_cannot_be_finished_is_not_left_running(tmp_path, monkeypatch):
    import ascendbench.job.record as record_module
    from ascendbench.errors import OutputWriteError

    writer = RecordWriter(tmp_path, {"seed": 1})
    writer.write()

    def full(path, data):
        raise OutputWriteError(f"could not write {path}: disk full")

    monkeypatch.setattr(record_module, "write_atomic", full)
    try:
        writer.finish("failed", RuntimeError("boom"), reason="unexpected")
    except OutputWriteError:
        pass
    assert not (tmp_path / "record.json").exists(), "the stale `running` record was left behind"


def test_a_running_record_is_compact_and_the_final_one_indented(tmp_path):
    writer = RecordWriter(tmp_path, {"seed": 1, "model": {"name": "m"}})
    writer.update(metrics={"psnr": {"value": 40.0}})
    running = (tmp_path / "record.json").read_text()
    assert "\n" not in running and json.loads(running)["metrics"] == {"psnr": {"value": 40.0}}
    writer.finish("ok")
    final = (tmp_path / "record.json").read_text()
    assert final.startswith('{\n  "schema"') and json.loads(final)["status"] == "ok"
    assert {k: v for k, v in json.loads(final).items() if k not in ("status", "timing")} == \
        {k: v for k, v in json.loads(running).items() if k not in ("status", "timing")}
