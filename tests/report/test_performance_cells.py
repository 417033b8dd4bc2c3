"""Performance table cells: memory shown once on CPU, all allocator figures on accelerators."""

from __future__ import annotations

from ascendbench.report.performance import memory_cell

COMPACT_COLUMNS = 10  # the most columns a table has that pastes into a README

CPU_ROW = {"bench.memory.peak_allocated_mb": 1670.0, "bench.memory.peak_reserved_mb": 1670.0,
           "bench.memory.peak_rss_mb": 1670.0,
           "bench.memory.scope": "cpu device: host process peak RSS"}


def test_cpu_memory_is_the_host_rss_once():
    assert memory_cell(CPU_ROW) == "rss 1670"


def test_accelerator_memory_keeps_allocated_reserved_and_rss():
    row = {**CPU_ROW, "bench.memory.peak_allocated_mb": 133.4,
           "bench.memory.peak_reserved_mb": 176.0,
           "bench.memory.scope": "npu:0 caching allocator"}
    assert memory_cell(row) == "allocated 133.4, reserved 176, rss 1670"


def test_no_memory_fields_say_missing():
    assert memory_cell({}) == "missing"


def test_a_column_saying_the_same_non_number_in_every_row_is_one_note(write_record, tmp_path):
    """CPU-only rows: no speed-up column reading "cpu run" in every row; the note says it once."""
    from ascendbench.report.gather import load_row
    from ascendbench.report.performance import performance_table

    rows = [load_row(write_record(f"cpu_{d}", device="cpu", dtype=d))
            for d in ("float32", "float16")]
    text = performance_table(rows, rows, "float32", tmp_path)
    header = text.splitlines()[0]
    assert "speed-up vs CPU" not in header and "speed-up vs CPU:" in text and "in every row" in text


def _perf_header(tmp_path, *extra):
    from ascendbench.report.__main__ import main

    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", *extra]) == 0
    section = (out / "report.md").read_text().split("## Performance\n", 1)[1].split("\n## ", 1)[0]
    line = next(line for line in section.splitlines() if line.startswith("| "))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_the_performance_columns_are_compact_by_default_and_a_choice(write_record, tmp_path):
    for device in ("npu",
                   "cpu"):  # a device x dtype x size x batch sweep: every identity column varies
        for dtype, side, batch in (("float16", 512, 1), ("bfloat16", 1024, 2)):
            write_record(f"{device}_{dtype}", device=device, dtype=dtype, height=side, width=side,
                         batch=batch)
    header = _perf_header(tmp_path)
    assert header == ["device", "dtype", "workload", "batch", "median ms", "p90 ms", "throughput",
                      "peak memory MB",
                      "speed-up vs CPU", "record"] and len(header) <= COMPACT_COLUMNS
    chosen = _perf_header(tmp_path, "--set", "performance.show=[cold_ms,median_ms]")
    assert chosen[4:] == ["cold ms", "median ms",
                          "record"], "the chosen columns, in the chosen order"


def test_an_unknown_performance_column_names_the_allowed_ones(write_record, tmp_path, capsys):
    from ascendbench.report.__main__ import main

    write_record("one")
    assert main([str(tmp_path / "records"), "--out", str(tmp_path / "r"), "--set",
                 "performance.show=[median]"]) == 2
    err = capsys.readouterr().err
    assert "performance.show" in err and "median_ms" in err and "[all]" in err
