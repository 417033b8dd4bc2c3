"""Plots: real PNGs of latency per dtype and error per dtype, none without data."""

from __future__ import annotations

import pytest
from PIL import Image

from ascendbench.report.gather import load_row
from ascendbench.report.plots import error_plot, latency_plot, safe_name


def test_latency_and_error_plots_are_png(write_record, tmp_path):
    rows = [load_row(write_record(f"{d}_{h}_{b}", dtype=d, height=h, width=h, batch=b,
                                  median_ms=h * b / 10))
            for d in ("float16", "float32") for h in (512, 1024) for b in (1, 2)]
    latency = latency_plot(rows, "flux2/small", tmp_path)
    error = error_plot(rows, "flux2/small", "mean_rel_err", tmp_path)
    assert (latency.name == f"{safe_name('flux2/small')}_latency.png"
            and error.name.endswith("_error.png"))
    assert latency.name.startswith("flux2_small_")
    for path in (latency, error):
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size[0] > 300


def test_no_data_no_plot(write_record, tmp_path):
    rows = [load_row(write_record("p", baseline="skipped"))]
    assert error_plot(rows, "m", "mean_rel_err", tmp_path) is None
    assert latency_plot([], "m", tmp_path) is None
    assert safe_name("flux2_small_decoder") == "flux2_small_decoder"  # already safe: it stays
    # never one file for two names
    assert safe_name("a b/c").startswith("a_b_c_") and safe_name("a b/c") != safe_name("a_b_c")
    assert len(safe_name("x" * 300)) <= 80 and safe_name("x" * 300) != safe_name("x" * 301)


def _axes():
    from ascendbench.report.plots import pyplot

    plt = pyplot()
    fig, ax = plt.subplots()
    return plt, fig, ax


def test_one_size_is_a_categorical_axis_with_ci_error_bars(write_record):
    from ascendbench.report.plots import draw_latency

    rows = {d: load_row(write_record(d, dtype=d, height=256, width=256, median_ms=50.0, ci=0.1))
            for d in ("float32", "float16")}
    plt, fig, ax = _axes()
    draw_latency(ax, {d: [(0.065536, row)] for d, row in rows.items()}, lambda r: "256x256")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256x256"]
    low, high = ax.get_xlim()
    assert low < -0.5 and high > 0.5, "padded around the one slot"
    bars = [c for c in ax.containers if c.has_yerr]
    assert len(bars) == 2
    segment = bars[0].lines[2][0].get_segments()[0]
    spans = [y for _, y in segment]
    assert spans == pytest.approx([45.0, 55.0]), "error bar spans the recorded 95% CI of the median"
    plt.close(fig)


def test_many_sizes_keep_a_numeric_axis_and_no_ci_no_error_bar(write_record):
    from ascendbench.report.plots import ci_errors, draw_latency

    rows = [load_row(write_record(f"s{h}", height=h, width=h, median_ms=h / 10))
            for h in (64, 128, 256, 512)]
    assert ci_errors(rows[0]) == (0.0, 0.0)
    plt, fig, ax = _axes()
    draw_latency(ax,
                 {"float16": [(h * h / 1e6, r)
                              for h, r in zip((64, 128, 256, 512), rows, strict=True)]},
                 str)
    assert ax.lines[0].get_xdata().tolist() == [h * h / 1e6 for h in (64, 128, 256, 512)]
    plt.close(fig)


def test_presets_at_one_size_are_separate_series_so_no_record_hides_another(write_record):
    from ascendbench.report.plots import _pixels, _series

    rows = [load_row(write_record(f"{d}_{p}", dtype=d, preset=p, height=32, width=32, median_ms=m))
            for d, p, m in (("float32", "mini", 1.0), ("float32", "balanced", 2.0),
                            ("float16", "mini", 3.0))]
    series = _series(rows, _pixels, lambda r: True)
    assert {name: [row["bench.latency.median_ms"] for _, row in pts]
            for name, pts in series.items()} == {"float32 mini": [1.0], "float32 balanced": [2.0],
                                                 "float16 mini": [3.0]}
    one_preset = _series(rows[:1] + rows[2:], _pixels, lambda r: True)
    assert set(one_preset) == {"float32", "float16"}, "plain dtype names when nothing collides"


def test_the_batch_panel_shows_the_batch_sweep_not_the_largest_single_run(write_record):
    """A 1/2/4 batch sweep at 512 px and one accuracy run at 1024 px, batch 1: the batch panel is at
    512 px."""
    from ascendbench.report.plots import _panels

    rows = [load_row(write_record(f"b{b}", height=512, width=512, batch=b, median_ms=10.0 * b))
            for b in (1, 2, 4)]
    rows.append(load_row(write_record("big", height=1024, width=1024, batch=1, median_ms=40.0)))
    _, (by_batch, title, _, _) = _panels(rows, "npu")
    assert [x for x, _ in next(iter(by_batch.values()))] == [1, 2, 4] and "512x512" in title


def _below(fig):
    """True when every legend of ``fig`` sits under its axes (its top at or below the axes'
    bottom)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend() is not None]
    assert legends, "the figure has legends"
    return all(leg.get_window_extent(renderer).y1 <= ax.get_window_extent(renderer).y0
               for ax, leg in legends)


def test_one_measurement_is_no_plot_and_a_single_point_panel_says_so(write_record):
    from ascendbench.report.plots import latency_figure, pyplot

    one = [load_row(write_record("only", median_ms=5.0))]
    assert latency_figure(one, "m") is None, "one measurement: the tables say it, no chart"
    rows = [load_row(write_record(f"s{h}", height=h, width=h, median_ms=h / 10))
            for h in (256, 512)]
    fig = latency_figure(rows, "m")
    assert len(fig.axes) == 2
    batch_panel = fig.axes[1]  # only batch 1 ran: one point at the size with the most batches
    texts = [t.get_text() for t in batch_panel.texts]
    assert "one measurement: no trend to read" in texts and any(t.endswith(" ms") for t in texts)
    assert not any("one measurement" in t.get_text() for t in fig.axes[0].texts), \
        "two sizes: a trend"
    assert _below(fig), "the legend never covers the data"
    pyplot().close(fig)


def test_repeated_runs_are_drawn_not_collapsed(write_record):
    from ascendbench.report.plots import latency_figure, pyplot

    rows = [load_row(write_record(f"r{i}", height=256, width=256, median_ms=m))
            for i, m in enumerate((5.0, 6.0))]
    rows.append(load_row(write_record("big", height=512, width=512, median_ms=9.0)))
    fig = latency_figure(rows, "m")
    earlier = [line for line in fig.axes[0].lines if "earlier runs" in line.get_label()]
    assert len(earlier) == 1 and earlier[0].get_label() == "float16: earlier runs (1)"
    assert sorted(earlier[0].get_ydata().tolist()) in ([5.0], [6.0]), \
        "the run not shown as the series' point"
    pyplot().close(fig)


def test_error_plot_has_a_threshold_line_per_dtype_bound_and_the_legend_below(write_record):
    from ascendbench.report.plots import error_figure, pyplot

    rows = [load_row(write_record(d, dtype=d, mean_rel_err=e, rule_max=b))
            for d, e, b in (("float32", 0.002, 0.01), ("float16", 0.008, 0.01),
                            ("bfloat16", 0.03, 0.05))]
    fig = error_figure(rows, "m", "mean_rel_err")
    lines = {line.get_label(): line.get_ydata()[0] for line in fig.axes[0].lines}
    assert lines == {"fail above 0.01 (float16, float32)": 0.01, "fail above 0.05 (bfloat16)": 0.05}
    assert len(fig.axes[0].patches) == 3, "one bar per run"
    assert _below(fig)
    pyplot().close(fig)


def test_a_plot_planted_as_a_link_is_replaced_not_written_through(write_record, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    rows = [load_row(write_record(f"r{b}", batch=b, median_ms=10.0 * b)) for b in (1, 2)]
    out = tmp_path / "reports"
    out.mkdir()
    (out / f"{safe_name('flux2_small_decoder')}_latency.png").symlink_to(victim)
    path = latency_plot(rows, "flux2_small_decoder", out)
    assert victim.read_bytes() == b"precious"
    assert not path.is_symlink() and path.read_bytes().startswith(b"\x89PNG")


def test_a_dtype_keeps_its_colour_in_every_panel(write_record):
    """float16 only in the size panel (batch 1 at 256 and 1024 px), float32 in both: float32 is
    drawn in one colour in both panels (the colour cycle started again per panel before)."""
    from ascendbench.report.plots import latency_figure, pyplot

    rows = [load_row(write_record(f"h{px}", dtype="float16", height=px, width=px))
            for px in (256, 1024)]
    rows += [load_row(write_record(f"b{b}", dtype="float32", height=512, width=512, batch=b,
                                   median_ms=10.0 * b)) for b in (1, 2)]
    fig = latency_figure(rows, "m")
    colours = {}
    for ax in fig.axes:
        for bars in ax.containers:  # errorbar: one container per series, its label the dtype
            colours.setdefault(bars.get_label(), set()).add(bars.lines[0].get_color())
    pyplot().close(fig)
    assert len(colours["float32"]) == 1 and colours["float32"] != colours["float16"], colours
