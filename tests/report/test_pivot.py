"""The latency pivot: workloads down, dtypes across, the median and its recorded 95% CI in each
cell."""

from __future__ import annotations

from ascendbench.report.__main__ import main


def _pivot_section(records, out) -> str:
    assert main([str(records), "--out", str(out), "--no-plots"]) == 0
    markdown = (out / "report.md").read_text()
    section = markdown.split("## Latency per size and dtype (median, 95% CI)\n", 1)[1]
    return section.split("\n## ", 1)[0]


def test_pivot_cells_are_median_and_ci_per_dtype(dtype_preset_records, tmp_path):
    section = _pivot_section(dtype_preset_records, tmp_path / "reports")
    pivot = section.split("### flux2_small_decoder on npu\n\n", 1)[1].split("\n\n", 1)[0]
    assert (pivot.splitlines()[0]
            == "| preset | size | batch | float32 ms [95% CI] | float16 ms [95% CI] |")
    mini = next(line for line in pivot.splitlines() if line.startswith("| mini |"))
    assert "| 25.6 [24.83, 26.37] ([record](" in mini and "| 14.08 [13.66, 14.5] ([record](" in mini
    assert "### flux2_small_decoder on cpu" in section
    assert "| 1408 [1366, 1450] ([record](" in section, "cpu float16 mini: 25.6 x 0.55 x 100 ms"


def test_a_dtype_not_run_for_a_workload_is_missing_and_hosts_are_apart(write_record, tmp_path):
    write_record("a32", dtype="float32", median_ms=20.0, ci=0.1)
    write_record("a16_big", dtype="float16", height=1024, width=1024, median_ms=30.0)
    write_record("b32", dtype="float32", host="host-b", median_ms=40.0, ci=0.1)
    section = _pivot_section(tmp_path / "records", tmp_path / "reports")
    assert ("### flux2_small_decoder on npu (host-a)" in section
            and "### flux2_small_decoder on npu (host-b)" in section)
    host_a = section.split("(host-a)", 1)[1].split("###", 1)[0]
    rows = [line for line in host_a.splitlines() if line.startswith("| mini |")]
    assert (rows[0].startswith("| mini | 512x512 | 1 | 20 [18, 22] ([record](")
            and rows[0].endswith("| missing |"))
    assert rows[1].startswith("| mini | 1024x1024 | 1 | missing | 30 ([record]("), \
        "no CI recorded: the median alone"
    assert "| 40 [36, 44] (" in section.split("(host-b)", 1)[1]


def test_no_timed_record_says_so(write_record, tmp_path):
    write_record("failed", status="failed")
    assert "no pivot to show" in _pivot_section(tmp_path / "records", tmp_path / "reports")
