"""Gathering: every record.json found, one flat row each, broken records kept as rows."""

from __future__ import annotations

import json
import math

import pytest

from ascendbench.errors import ReportError
from ascendbench.report.gather import find_records, load_row, records_frame


def test_finds_records_in_directories_and_files_once(write_record, tmp_path):
    a = write_record("a")
    b = write_record("nested/deeper/b")
    found = find_records([tmp_path / "records", a])
    assert found == sorted([a.resolve(), b.resolve()])


def test_missing_path_is_an_error_unless_allowed(tmp_path):
    with pytest.raises(ReportError, match="does not exist"):
        find_records([tmp_path / "nope"])
    assert find_records([tmp_path / "nope"], missing_ok=True) == []


def test_row_is_flat_with_dotted_keys(write_record):
    row = load_row(write_record("a", median_ms=20.0, mean_rel_err=0.0078))
    assert row["status"] == "ok"
    assert row["job.dtype"] == "float16"
    assert row["bench.latency.median_ms"] == 20.0
    assert row["metrics.mean_rel_err.value"] == 0.0078
    assert row["metrics.mean_rel_err.verdict"] == "PASS"
    assert row["metrics.image_lpips.skipped"].startswith("LPIPS")
    assert row["env.device.name"] == "Ascend910B4"
    assert row["env.torch_cuda"] == "none", \
        "an explicit null in env reads as 'none', not as missing"
    assert row["inputs.digest"].startswith("sha256:")
    assert json.loads(row["artifacts"])["heatmap_png"] == "images/heatmap.png"


def test_inf_strings_of_the_record_become_floats(tmp_path):
    path = tmp_path / "r" / "record.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"status": "ok", "metrics": {"psnr_db": {"value": "inf"}},
                                "job": {"model": "m"}}))
    assert load_row(path)["metrics.psnr_db.value"] == math.inf


@pytest.mark.parametrize("content, reason", [("{not json", "JSONDecodeError"),
                                             ('{"hello": 1}', "not an ascendbench record")])
def test_broken_record_becomes_a_row_saying_so(tmp_path, content, reason):
    path = tmp_path / "job" / "record.json"
    path.parent.mkdir()
    path.write_text(content)
    row = load_row(path)
    assert row["status"] == "broken"
    assert reason in row["error.message"]


def test_frame_rows_in_sweep_order_batch_before_dtype(write_record, tmp_path):
    write_record("z", dtype="float32")
    write_record("y", dtype="bfloat16")
    write_record("x", dtype="float16", batch=2)
    write_record("w", dtype="float16", batch=1)
    frame = records_frame([tmp_path / "records"])
    assert list(frame["job.dtype"]) == ["float32", "float16", "bfloat16",
                                        "float16"], "dtype order of a dtype sweep"
    assert list(frame["job.batch_size"]) == [1, 1, 1, 2]


def test_empty_directory_gives_an_empty_frame(tmp_path):
    frame = records_frame([tmp_path])
    assert frame.empty and "status" in frame.columns


def test_the_sweep_summary_counts_computed_and_cached_references():
    import pandas as pd

    from ascendbench.report.summary import references_line

    frame = pd.DataFrame({"baseline.computed": [True, False, False],
                          "baseline.cache_hit": [False, True, True]})
    assert references_line(frame) == " CPU references: 1 computed, 2 from the cache."
    assert references_line(pd.DataFrame({"status": ["ok"]})) == "", "no reference section: no line"


def test_a_record_linked_from_outside_the_directory_is_left_out(tmp_path, caplog):
    """A ``record.json`` planted as a link to a file elsewhere (another user's private file, say) is
    never read from a directory scan; a link to a record inside the directory is read once; the file
    named itself is read."""
    outside = tmp_path / "private" / "record.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps({"status": "ok", "secret": "x"}))
    shared = tmp_path / "shared"
    (shared / "job" / "evil").mkdir(parents=True)
    (shared / "job" / "record.json").write_text(json.dumps({"status": "ok"}))
    (shared / "job" / "evil" / "record.json").symlink_to(outside)
    (shared / "again").mkdir()
    (shared / "again" / "record.json").symlink_to(shared / "job" / "record.json")
    with caplog.at_level("WARNING", logger="ascendbench.report.gather"):
        found = find_records([shared])
    assert found == [(shared / "job" / "record.json").resolve()]
    assert "outside" in caplog.text and str(outside) in caplog.text
    assert find_records([shared / "job" / "evil" / "record.json"]) == [outside.resolve()]
