"""A record stamped in the future (beyond a clock skew) is never a workload's latest without a word:
not in the gate, not in the report's tables."""

from __future__ import annotations

import json
import logging
import time

from ascendbench.report.__main__ import main
from ascendbench.report.gather import records_frame
from ascendbench.report.select import latest_per_workload

YEAR_S = 365 * 24 * 3600.0


def _stamp(path, ahead_s: float) -> None:
    """Set the record's ``timing.finished_at`` ``ahead_s`` seconds from now."""
    record = json.loads(path.read_text())
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(time.time() + ahead_s))
    record["timing"]["finished_at"] = stamp
    path.write_text(json.dumps(record))


def test_a_pass_stamped_a_year_ahead_does_not_hide_a_real_fail(write_record, tmp_path, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    write_record("a", root=old, mean_rel_err=0.005)
    write_record("fail", root=new, mean_rel_err=0.5)  # a real FAIL, now
    _stamp(write_record("future", root=new, mean_rel_err=0.005), YEAR_S)
    assert main(["--compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "| verdict | PASS | FAIL |" in out and "no regression" not in out
    assert "future/record.json: finished" in out and "in the future" in out


def test_a_workload_only_stamped_in_the_future_is_missing_in_new(write_record, tmp_path, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    write_record("a", root=old)
    _stamp(write_record("a", root=new), YEAR_S)
    _stamp(write_record("a", root=old / "later"), YEAR_S)
    assert main(["--compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "missing in NEW" in out and "OLD " in out and "in the future" in out


def test_the_reports_latest_skips_the_future_with_a_warning(write_record, tmp_path, caplog):
    root = tmp_path / "records"
    write_record("now", root=root, median_ms=10.0)
    _stamp(write_record("skewed", root=root, median_ms=11.0), 60.0)  # a clock a minute ahead
    _stamp(write_record("future", root=root, median_ms=99.0), YEAR_S)
    rows = records_frame([root]).to_dict("records")
    with caplog.at_level(logging.WARNING, logger="ascendbench.report.select"):
        (row,) = latest_per_workload(rows)
    assert row["record"].endswith("skewed/record.json"), "within the clock skew: the latest"
    assert "future/record.json finished" in caplog.text and "skewed" not in caplog.text
