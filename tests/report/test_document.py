"""The report from records: tables with one linked row per record, labels, speed-ups, failures,
environment."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pandas as pd
import pytest

from ascendbench.errors import ReportError
from ascendbench.report.__main__ import main
from ascendbench.report.document import Report, write_report
from ascendbench.report.gather import records_frame
from ascendbench.report.settings import load_settings

LINK = re.compile(r"\]\(<?([^)>]+)>?\)")


@pytest.fixture
def seed_records(write_record):
    """The FLUX.2 seed's story: NPU float32/float16 pass, bfloat16 fails, CPU float32 is slow."""
    paths = {
        "fp32": write_record("npu_fp32", dtype="float32", mean_rel_err=0.0024, median_ms=350.0),
        "fp16": write_record("npu_fp16", dtype="float16", mean_rel_err=0.0078, median_ms=92.0),
        "bf16": write_record("npu_bf16", dtype="bfloat16", mean_rel_err=0.0733, median_ms=90.0),
        "cpu": write_record("cpu_fp32", device="cpu", dtype="float32", mean_rel_err=4e-6,
                            median_ms=325000.0),
        "perf": write_record("npu_fp16_perf", dtype="float16", batch=4, baseline="skipped",
                             median_ms=360.0),
        "tiny": write_record("tiny", model="tiny_flux2_decoder", device="cpu", dtype="float32",
                             weights="random",
                             height=32, width=32, mean_rel_err=4e-6, median_ms=11.0),
        "failed": write_record("npu_fail", dtype="float16", status="failed", height=1024,
                               width=1024),
        "killed": write_record("npu_killed", dtype="float16", status="running", height=2048,
                               width=2048),
    }
    return paths


def _report(tmp_path, *extra, plots=False):
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), *extra,
                 *([] if plots else ["--no-plots"])]) == 0
    return out, (out / "report.md").read_text()


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_row_links_an_existing_record_and_counts_match(seed_records, tmp_path):
    out, text = _report(tmp_path, plots=True)
    accuracy = _section(text, "Accuracy")
    record_links = [m for m in LINK.findall(accuracy) if m.endswith("record.json")]
    assert len(record_links) == 5, \
        "one accuracy row per judged ok record (the perf-only run has none)"
    assert not any("npu_fp16_perf" in link for link in record_links)
    for target in LINK.findall(text):
        assert (out / target).resolve().exists(), f"dangling link {target}"
    assert "8 record(s): 1 failed, 6 ok, 1 running" in text
    assert len(pd.read_csv(out / "records.csv")) == 8
    assert (out / "records.parquet").exists() == (importlib.util.find_spec("pyarrow") is not None)


def test_cells_carry_verdicts_and_labels(seed_records, tmp_path):
    _, text = _report(tmp_path)
    accuracy = _section(text, "Accuracy")
    bf16 = next(line for line in accuracy.splitlines() if "| bfloat16 |" in line)
    assert "| 7.33% FAIL |" in bf16, "the verdict once per cell"
    assert "- rule mean_rel_err: <= 1% (FLUX.2 seed)" in accuracy, "the rule once, under the table"
    assert "image_lpips" not in bf16, "a skipped metric is a note under the table, not a column"
    assert ("skipped (every row) image_lpips: LPIPS backbone weights not available offline"
            in accuracy), "skipped metric"
    assert "npu_fp16_perf" not in accuracy, "a perf-only run has no accuracy row"
    tiny = _section(text, "Accuracy").split("### tiny_flux2_decoder", 1)[1]
    assert "random-init (seed 42) †" in tiny and "0.0004% PASS †" in tiny
    assert "† random-init weights" in tiny


def test_speed_up_over_cpu_and_flops(seed_records, tmp_path):
    _, text = _report(tmp_path, "--set", "performance.show=[median_ms,flops,speedup]")
    performance = _section(text, "Performance")
    lines = performance.splitlines()
    fp16 = next(line for line in lines if "| float16 | mini @ 512x512 | 1 |" in line
                and "npu" in line)
    assert "3533x vs cpu float32 325000 ms" in fp16
    assert "| 0.12 |" in fp16, "MFU from bench.flops.mfu"
    batch4 = next(line for line in lines if "| float16 | mini @ 512x512 | 4 |" in line)
    assert "no CPU run of this workload" in batch4
    assert "Speed-up vs CPU = median latency of the CPU run" in performance


def test_failed_and_unfinished_jobs_are_listed_with_their_error(seed_records, tmp_path):
    _, text = _report(tmp_path)
    failures = _section(text, "Failed jobs")
    assert "RuntimeError (unexpected)" in failures and "aclnn error 561000" in failures
    assert "no final status: the job was killed or is still running" in failures


def test_environment_per_machine(seed_records, write_record, tmp_path):
    write_record("cuda_fp16", device="cuda", host="host-b")
    _, text = _report(tmp_path)
    environment = _section(text, "Environment per machine")
    rows = [line for line in environment.splitlines() if line.startswith("| host-")]
    assert {r.split(" | ")[0] for r in rows} == {"| host-a", "| host-b"}
    assert any("npu: Ascend910B4" in r and "| 8.0 |" in r
               for r in rows), "CANN version of the NPU host"


def test_no_filler_text_and_no_nan_anywhere(seed_records, tmp_path):
    _, text = _report(tmp_path)
    for bad in ("TBD", "to be filled", "待填", "| nan |", "None |"):
        assert bad not in text


def test_empty_directory_says_there_are_no_records(tmp_path):
    (tmp_path / "records").mkdir()
    out, text = _report(tmp_path)
    assert "No records found under" in text
    assert "|" not in text, "no table at all"
    assert not (out / "plots").exists()


def test_media_artifacts_are_linked_when_the_files_exist(seed_records, tmp_path):
    heatmap = seed_records["fp16"].parent / "images" / "heatmap.png"
    heatmap.parent.mkdir()
    heatmap.write_bytes(b"\x89PNG")
    _, text = _report(tmp_path)
    media = _section(text, "Images and heatmaps written by the jobs")
    assert "[heatmap_png](../records/npu_fp16/images/heatmap.png)" in media
    assert "image_device_png (listed in the record, file not found)" in media


def test_sections_render_relative_to_any_directory(seed_records, tmp_path):
    report = Report(records_frame([tmp_path / "records"]), load_settings(), ["records"])
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    section = report.section("accuracy", deep)
    assert "(../../records/npu_fp16/record.json)" in section


def test_bad_path_and_bad_option_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([str(tmp_path), "--set", "nosuch.key=1"]) == 2
    assert "report option override" in capsys.readouterr().err


def test_write_report_returns_what_it_wrote(seed_records, tmp_path):
    report = Report(records_frame([tmp_path / "records"]), load_settings(["plots=false"]),
                    ["records"])
    written = write_report(report, tmp_path / "out")
    assert written["markdown"].read_text().startswith("# ascendbench report")
    assert not report.plot_files and "No plots" in report.section("plots", tmp_path)
    assert Path(written["csv"]).exists()


def test_a_full_disk_without_a_file_name_is_said_without_one(write_record, tmp_path, monkeypatch):
    def full(report, out_dir):
        raise OSError(28, "No space left on device")

    write_record("npu_fp16")
    monkeypatch.setattr("ascendbench.report.document._write_all", full)
    report = Report(records_frame([tmp_path / "records"]), load_settings(), ["records"])
    with pytest.raises(ReportError, match=r"No space left on device\)\. Free space") as failure:
        write_report(report, tmp_path / "out")
    assert "None" not in str(failure.value)
