"""Text from records reaches no output with its control characters: terminal escapes (ESC, OSC,
BEL), NUL and bidirectional overrides planted in a record's hostname, platform, warnings and error
are escaped in report.md, report.html, records.csv, the port report, the README and the console."""

from __future__ import annotations

import json

import pytest

from ascendbench.job.summary import print_summary
from ascendbench.report.__main__ import main

PLANTED = "\x1b]0;TITLE\x07\x1b[2J\u202eevil\x00end"
RAW = ("\x1b", "\x07", "\x00", "\u202e")
README = "# Port\n\n<!-- ascendbench:failures -->\n<!-- /ascendbench:failures -->\n"


def _plant(record_path, **edits) -> None:
    record = json.loads(record_path.read_text())
    record["env"].update(hostname="host" + PLANTED, platform="Linux" + PLANTED)
    record["warnings"] = ["slow" + PLANTED]
    record.update(edits)
    record_path.write_text(json.dumps(record))


@pytest.mark.parametrize("output", ["report.md", "report.html", "records.csv", "port", "README"])
def test_control_characters_of_a_record_are_escaped_in_every_report_file(write_record, tmp_path,
                                                                         output):
    _plant(write_record("ok"))
    _plant(write_record("f", status="failed"),
           error={"type": "RuntimeError", "message": "boom" + PLANTED, "reason": "unexpected"})
    readme = tmp_path / "README.md"
    readme.write_text(README)
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", "--port",
                 "--readme", str(readme)]) == 0
    written = {"README": readme, "port": out / "port" / "flux2_small_decoder.md"}
    text = written.get(output, out / output).read_text()
    assert "TITLE" in text, "the planted text is shown, only escaped"
    assert not [c for c in RAW if c in text], f"raw control characters in {output}"


def test_control_characters_of_a_resumed_record_are_escaped_on_the_console(write_record, capsys):
    """A resumed job prints the summary of a record found in its directory (data, not its own)."""
    path = write_record("ok")
    _plant(path)
    print_summary(json.loads(path.read_text()), path)
    text = capsys.readouterr().out
    assert "slow" in text and "TITLE" in text
    assert not [c for c in RAW if c in text], "raw control characters on the console"
