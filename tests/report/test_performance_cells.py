"""Performance table cells: memory shown once on CPU, all allocator figures on accelerators."""

from __future__ import annotations

from ascendbench.report.performance import memory_cell

CPU_ROW = {"bench.memory.peak_allocated_mb": 1670.0, "bench.memory.peak_reserved_mb": 1670.0,
           "bench.memory.peak_rss_mb": 1670.0, "bench.memory.scope": "cpu device: host process peak RSS"}


def test_cpu_memory_is_the_host_rss_once():
    assert memory_cell(CPU_ROW) == "rss 1670"


def test_accelerator_memory_keeps_allocated_reserved_and_rss():
    row = {**CPU_ROW, "bench.memory.peak_allocated_mb": 133.4, "bench.memory.peak_reserved_mb": 176.0,
           "bench.memory.scope": "npu:0 caching allocator"}
    assert memory_cell(row) == "allocated 133.4, reserved 176, rss 1670"


def test_no_memory_fields_say_missing():
    assert memory_cell({}) == "missing"


def test_a_column_saying_the_same_non_number_in_every_row_is_one_note(write_record, tmp_path):
    """CPU-only rows: no speed-up column reading "cpu run" in every row; the note says it once."""
    from ascendbench.report.gather import load_row
    from ascendbench.report.performance import performance_table

    rows = [load_row(write_record(f"cpu_{d}", device="cpu", dtype=d)) for d in ("float32", "float16")]
    text = performance_table(rows, rows, "float32", tmp_path)
    header = text.splitlines()[0]
    assert "speed-up vs CPU" not in header and "speed-up vs CPU:" in text and "in every row" in text
