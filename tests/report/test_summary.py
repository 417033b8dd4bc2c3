"""The sweep's summary.md: the A/B line of a job timed with its patches against none
(``bench.ab=unpatched``)."""

from __future__ import annotations

import json

from ascendbench.report.gather import ab_fields, records_frame
from ascendbench.report.summary import summary_markdown

JOB = {"model": "gemm", "device": "cpu", "dtype": "float32", "preset": "mini", "batch_size": 1}


def _record(path, ab=None):
    path.mkdir(parents=True)
    record = {"status": "ok", "job": JOB, "bench": {"latency": {"median_ms": 1.0}}}
    if ab is not None:
        record["ab"] = ab
    (path / "record.json").write_text(json.dumps(record))


def test_a_job_with_an_ab_gets_one_line_its_text_escaped(tmp_path):
    decision = {"verdict": "FASTER",
                "effect": "-12.0% (95% CI -13.0% .. -11.0%), p=1e-05 ![x](/etc/passwd)"}
    _record(tmp_path / "sweep" / "a",
            {"decision": decision, "speedup_paired": 1.136, "a": {"samples_ms": [1.0]}})
    _record(tmp_path / "sweep" / "b")
    markdown = summary_markdown(records_frame([tmp_path / "sweep"]), tmp_path / "sweep")
    lines = [line for line in markdown.splitlines() if line.startswith("- [")]
    assert (len(lines) == 1 and lines[0].startswith("- [a](a/record.json): -12.0%")
            and lines[0].endswith(": FASTER"))
    assert "!\\[x\\](/etc/passwd)" in lines[0], "record text is made inert in Markdown"
    assert "Patches against none, interleaved" in markdown


def test_no_ab_no_line_and_a_damaged_section_gives_no_fields(tmp_path):
    _record(tmp_path / "sweep" / "b")
    assert "Patches against none" not in summary_markdown(records_frame([tmp_path / "sweep"]),
                                                          tmp_path / "sweep")
    assert ab_fields({"decision": {"verdict": 3, "effect": ["x"]}, "speedup_paired": True}) == {}
    assert ab_fields("FASTER") == {} and ab_fields({"decision": "FASTER"}) == {}
