"""Plots: real PNGs of latency per dtype and error per dtype, none without data."""

from __future__ import annotations

from PIL import Image

from ascendbench.report.gather import load_row
from ascendbench.report.plots import error_plot, latency_plot, safe_name


def test_latency_and_error_plots_are_png(write_record, tmp_path):
    rows = [load_row(write_record(f"{d}_{h}_{b}", dtype=d, height=h, width=h, batch=b, median_ms=h * b / 10))
            for d in ("float16", "float32") for h in (512, 1024) for b in (1, 2)]
    latency = latency_plot(rows, "flux2/small", tmp_path)
    error = error_plot(rows, "flux2/small", "mean_rel_err", tmp_path)
    assert latency.name == "flux2_small_latency.png" and error.name == "flux2_small_error.png"
    for path in (latency, error):
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size[0] > 300


def test_no_data_no_plot(write_record, tmp_path):
    rows = [load_row(write_record("p", baseline="skipped"))]
    assert error_plot(rows, "m", "mean_rel_err", tmp_path) is None
    assert latency_plot([], "m", tmp_path) is None
    assert safe_name("a b/c") == "a_b_c"
