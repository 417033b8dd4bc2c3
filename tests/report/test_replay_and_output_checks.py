"""The report's per-module local-error section (replay reference) and its reference-free checks
section."""

from __future__ import annotations

import json
from pathlib import Path

from ascendbench.report.document import Report
from ascendbench.report.gather import records_frame
from ascendbench.report.settings import load_settings

RULE = {"threshold": 1.9e-06, "rule": "<= 1.9e-06", "source": "unit roundoff x margin"}


def _edit(path: Path, **sections) -> None:
    record = json.loads(path.read_text())
    for key, value in sections.items():
        record[key] = {**(record.get(key) or {}), **value} if isinstance(value, dict) else value
    path.write_text(json.dumps(record))


def _report(tmp_path: Path) -> str:
    return Report(records_frame([tmp_path / "records"]), load_settings(["plots=false"]),
                  ["records"]).markdown(tmp_path)


def test_replay_section_names_the_first_divergent_module(write_record, tmp_path: Path) -> None:
    replayed = write_record("replayed", model="ltx_video_vae", dtype="bfloat16", weights="random")
    write_record("whole", model="ltx_video_vae", dtype="bfloat16")
    metrics = {"replay/decoder.conv_in#0/local_rel_err": {"value": 1e-7, "verdict": "PASS", **RULE},
               "replay/decoder.up_blocks.1#0/local_rel_err": {"value": 0.4, "verdict": "FAIL",
                                                              **RULE,
                                                              "max_abs_err": 3.0, "cosine": 0.9},
               "replay/decoder.conv_out#0/local_rel_err": {"value": 2e-7, "verdict": "PASS",
                                                           **RULE}}
    _edit(replayed,
          baseline={"mode": "replay", "reason": "auto: the whole-model reference does not fit"},
          metrics=metrics)
    text = _report(tmp_path)
    section = text.split("## Local error per module (replay reference)")[1].split("\n## ")[0]
    assert "First divergent module: **decoder.up_blocks.1#0**" in section
    assert "auto: the whole-model reference does not fit" in section
    assert section.count("| decoder.") == 3 and "| 0.4 | <= 1.9e-06 | 3 | 0.9 | FAIL |" in section
    assert "records/whole" not in section  # the whole-model job stays in the accuracy table


def test_output_checks_section_says_judged_or_not(write_record, tmp_path: Path) -> None:
    judged, untrained = write_record("judged"), write_record("untrained", weights="random")
    _edit(judged,
          metrics={"output_spectral_exponent": {"value": 0.2, "verdict": "FAIL", "threshold": 1.0}})
    _edit(untrained,
          metrics={"output_spectral_exponent": {"value": 0.3, "verdict": None, "would_be": "FAIL",
                                                            "not_judged": "random-init weights"}})
    section = _report(tmp_path).split("## Output checks without a reference")[1].split("\n## ")[0]
    assert "| 0.2 FAIL |" in section
    assert "| 0.3 would be FAIL, not judged |" in section
    header = next(line for line in section.splitlines() if line.startswith("| model"))
    assert "spectral exponent" in header and "flicker" not in header, \
        "a check no job ran is no column"
    assert "missing" not in section


def test_sections_say_when_there_is_nothing(write_record, tmp_path: Path) -> None:
    write_record("plain")
    text = _report(tmp_path)
    assert "No job used the replay reference" in text
    assert "no reference-free check ran" in text


def test_the_per_resolution_table_is_filled_from_the_replay_and_labelled(write_record,
                                                                         tmp_path: Path) -> None:
    replayed = write_record("sulphur", model="sulphur2_base", dtype="bfloat16", height=512,
                            width=768)
    metrics = {"replay/transformer.transformer_blocks.0#0/local_rel_err": {
                   "value": 2e-3, "verdict": "PASS", **RULE, "max_abs_err": 0.25,
                   "cosine": 0.99999},
               "replay/transformer.transformer_blocks.47#0/local_rel_err": {
                   "value": 3e-3, "verdict": "PASS", **RULE, "max_abs_err": 0.5, "cosine": 0.9999}}
    _edit(replayed,
          baseline={"mode": "replay", "reason": "auto: the whole-model reference does not fit"},
          metrics=metrics, verdict="PASS",
          job={"task": "ascendbench.tasks.TextToVideoTask", "steps": 8, "num_frames": 49})
    title = "## Accuracy per resolution (Sulphur-2 seed layout)"
    section = _report(tmp_path).split(title)[1].split("\n## ")[0]
    assert ("| 512x768 | 49 | 8 | 0.5 replay (per-module) | 0.9999 replay (per-module) | - | - | "
            "PASS |" in section)
    assert "replay (per-module): no whole-model reference ran for this row" in section
    zh = Report(records_frame([tmp_path / "records"]), load_settings(["plots=false", "lang=zh"]),
                ["records"]).markdown(tmp_path)
    assert ("| 512x768 | 49 | 8 | 0.5 replay (per-module) | 0.9999 replay (per-module) | - | - | "
            "PASS |\n" in zh)
    assert "分辨率" in zh.split("replay (per-module)")[0].rsplit("\n## ", 1)[-1], \
        "the seed layout's own headers"
