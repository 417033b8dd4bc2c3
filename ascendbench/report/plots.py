"""PNG plots (matplotlib, Agg): latency with CI error bars vs resolution and batch per dtype, error per dtype."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import get, num, size_label
from ascendbench.report.meaning import section_metric
from ascendbench.report.performance import latest, median_ms


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def safe_name(text: str) -> str:
    """A file-name-safe version of ``text``: itself when it is one, else its safe characters (at most 60) and a
    digest of the whole text, so that a long name still fits a file system and two names never share a file."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_") or "model"
    if safe == str(text) and len(safe) <= 80 and not safe.startswith("."):
        return safe
    return f"{safe[:60]}_{hashlib.sha256(str(text).encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def _pixels(row: Mapping[str, Any]) -> float:
    frames = get(row, "job.num_frames") or 1
    return float(get(row, "job.height")) * float(get(row, "job.width")) * float(frames) / 1e6


# With this many distinct x values or fewer a panel is categorical (one evenly spaced, labelled slot per
# value, padded on both sides) instead of a numeric axis on which one or two points sit at its edges.
CATEGORICAL_MAX = 3
CI_KEYS = ("bench.latency.median_ci95_low_ms", "bench.latency.median_ci95_high_ms")
Point = tuple[float, Mapping[str, Any]]


def ci_errors(row: Mapping[str, Any]) -> tuple[float, float]:
    """(below, above): how far the 95% CI of the median reaches from the median; (0, 0) without a CI."""
    median, low, high = median_ms(row), get(row, CI_KEYS[0]), get(row, CI_KEYS[1])
    if median is None or not isinstance(low, (int, float)) or not isinstance(high, (int, float)):
        return 0.0, 0.0
    return max(median - float(low), 0.0), max(float(high) - median, 0.0)


def _presets_share_a_point(rows: Sequence[Mapping[str, Any]], x) -> bool:
    """True when two presets of one dtype land on the same x (a preset sweep at one size): series then split
    by preset, so that no record hides another."""
    seen: dict[tuple[str, float], set[str]] = {}
    for row in rows:
        seen.setdefault((str(get(row, "job.dtype")), x(row)), set()).add(str(get(row, "job.preset")))
    return any(len(presets) > 1 for presets in seen.values())


def _series(rows: Sequence[Mapping[str, Any]], x, fixed) -> dict[str, list[Point]]:
    """Series name (dtype, or ``dtype preset`` where presets share a point) -> sorted (x, latest row) points
    among rows where ``fixed(row)`` holds."""
    chosen = [row for row in rows if fixed(row)]
    split = _presets_share_a_point(chosen, x)
    points: dict[str, dict[float, list]] = {}
    for row in chosen:
        name = f"{get(row, 'job.dtype')} {get(row, 'job.preset')}" if split else str(get(row, "job.dtype"))
        points.setdefault(name, {}).setdefault(x(row), []).append(row)
    return {d: sorted(((xv, _with_repeats(rs)) for xv, rs in pts.items()), key=lambda p: p[0])
            for d, pts in sorted(points.items())}


REPEATS = "plot.repeats"  # the medians of the earlier runs of a point (repeats are drawn, never collapsed)


def _with_repeats(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The latest of ``rows`` carrying the median latencies of the others under :data:`REPEATS`."""
    last = latest(rows)
    return {**last, REPEATS: [median_ms(r) for r in rows if r is not last and median_ms(r)]}


def _bars(points: Sequence[Point]) -> tuple[list[float], list[list[float]]]:
    """Medians and their (below, above) CI error bars, as ``Axes.errorbar`` takes them."""
    errors = [ci_errors(row) for _, row in points]
    return [median_ms(row) for _, row in points], [[e[0] for e in errors], [e[1] for e in errors]]


def draw_latency(ax: Any, series: dict[str, list[Point]], label) -> bool:
    """Median latency per dtype with 95% CI error bars: a numeric x axis, or categorical for few x values.

    ``label(row)`` names an x value on a categorical axis (``512x512``, ``batch 2``). Returns True when the
    axis is categorical.
    """
    xs = sorted({x for pts in series.values() for x, _ in pts})
    categorical = len(xs) <= CATEGORICAL_MAX
    width = 0.6 / max(len(series), 1)
    names: dict[float, str] = {}
    for i, (dtype, pts) in enumerate(series.items()):
        medians, errors = _bars(pts)
        if categorical:
            where = [xs.index(x) + (i - (len(series) - 1) / 2) * width for x, _ in pts]
            names.update((x, label(row)) for x, row in pts)
        else:
            where = [x for x, _ in pts]
        drawn = ax.errorbar(where, medians, yerr=errors, marker="o", capsize=4, label=dtype,
                            linestyle="none" if categorical else "-")
        _draw_repeats(ax, where, pts, (dtype, drawn.lines[0].get_color()))
    if categorical:
        ax.set_xticks(range(len(xs)), [names[x] for x in xs])
        ax.set_xlim(-0.5 - width * len(series), len(xs) - 0.5 + width * len(series))
    return categorical


def _draw_repeats(ax: Any, where: Sequence[float], points: Sequence[Point], series: tuple[str, str]) -> None:
    """The earlier runs of each point as hollow markers at its x (labelled once): repeats stay visible."""
    xs = [x for x, (_, row) in zip(where, points, strict=True) for _ in row.get(REPEATS) or []]
    ys = [m for _, row in points for m in row.get(REPEATS) or []]
    if xs:
        ax.plot(xs, ys, linestyle="none", marker="o", markerfacecolor="none", color=series[1], alpha=0.6,
                label=f"{series[0]}: earlier runs ({len(xs)})")


def _note_single(ax: Any, series: dict[str, list[Point]]) -> None:
    """A panel with one measurement: its value written beside the marker and a note that there is no trend."""
    points = [row for pts in series.values() for _, row in pts]
    if len(points) == 1:
        ax.annotate(f"{num(median_ms(points[0]))} ms", (0, median_ms(points[0])), textcoords="offset points",
                    xytext=(8, 8), fontsize=8)
        ax.text(0.02, 0.95, "one measurement: no trend to read", transform=ax.transAxes, fontsize=7, va="top",
                color="dimgray")


def legend_below(ax: Any) -> None:
    """The legend under the axes (never over the data), in as many columns as fit."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=min(len(labels), 3),
                  fontsize=7, frameon=False)


def latency_figure(rows: Sequence[Mapping[str, Any]], model: str) -> Any | None:
    """The figure of :func:`latency_plot` (``None`` with fewer than two measured points: nothing to compare)."""
    rows = [r for r in rows if median_ms(r) and get(r, "job.height") and get(r, "job.width")
            and get(r, "job.batch_size")]
    if len(rows) < 2:
        return None
    plt = _pyplot()
    devices = sorted({str(get(r, "job.device")) for r in rows})
    fig, axes = plt.subplots(len(devices), 2, figsize=(10, 4.2 * len(devices)), squeeze=False)
    for axrow, device in zip(axes, devices, strict=True):
        for ax, (series, title, xlabels, label) in zip(axrow, _panels(rows, device), strict=True):
            categorical = draw_latency(ax, series, label)
            ax.set(xlabel=xlabels[categorical], ylabel="median latency (ms)", yscale="log")
            ax.set_title(title, fontsize=9)
            ax.grid(True, alpha=0.3)
            _note_single(ax, series)
            legend_below(ax)
    fig.suptitle(f"{model}: median latency per dtype\n(error bars: 95% CI of the median, where recorded)",
                 fontsize=10)
    return fig


def latency_plot(rows: Sequence[Mapping[str, Any]], model: str, out: Path) -> Path | None:
    """Median latency (with its 95% CI) vs resolution at the smallest batch and vs batch at the largest size.

    One row of two panels per device, one series per dtype (per dtype and preset where presets share a size and
    batch), earlier runs of a point as hollow markers, the legend under each panel; see :func:`draw_latency`
    for the axes. No plot for a single measurement (the tables say it).
    """
    fig = latency_figure(rows, model)
    return None if fig is None else _save(_pyplot(), fig, out / f"{safe_name(model)}_latency.png")


def _panels(rows: Sequence[Mapping[str, Any]], device: str) -> tuple[tuple, tuple]:
    """(series, title, x labels (numeric, categorical), category label) of a device's two panels: by
    resolution, by batch."""
    mine = [r for r in rows if str(get(r, "job.device")) == device]
    batch = min(int(get(r, "job.batch_size")) for r in mine)
    batches: dict[float, set[int]] = {}
    for row in mine:
        batches.setdefault(_pixels(row), set()).add(int(get(row, "job.batch_size")))
    # the size with the most batch sizes (the largest of those): a batch sweep at 512 px is not hidden behind
    # a 1024 px accuracy run at batch 1
    largest = max(batches, key=lambda px: (len(batches[px]), px))
    by_size = _series(mine, _pixels, lambda r: int(get(r, "job.batch_size")) == batch)
    by_batch = _series(mine, lambda r: int(get(r, "job.batch_size")), lambda r: _pixels(r) == largest)
    return ((by_size, f"{device}: batch {batch}", ("megapixels per sample (H x W [x frames])", "size"), size_label),
            (by_batch, f"{device}: by batch at {size_label(next(r for r in mine if _pixels(r) == largest))}",
             ("batch size", "batch size"),
             lambda r: f"batch {num(get(r, 'job.batch_size'))}"))


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def bounds_by_dtype(rows: Sequence[Mapping[str, Any]], metric: str) -> dict[float, list[str]]:
    """The fail bounds the rows' error metric was judged by, each with the dtypes judged by it (a threshold
    line per bound: float16 and bfloat16 may have their own)."""
    bounds: dict[float, set[str]] = {}
    for row in rows:
        name = section_metric(row, "error", [metric])
        bound = get(row, f"metrics.{name}.threshold") if name else None
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound > 0:
            bounds.setdefault(float(bound), set()).add(str(get(row, "job.dtype")))
    return {b: sorted(d) for b, d in sorted(bounds.items())}


def _error_points(rows: Sequence[Mapping[str, Any]], metric: str) -> list[tuple[str, str, float]]:
    """(device, label, value) of the metric answering the ``error`` section in each row (the task's declared
    one: ``video/mean_rel_err``, never ``audio/...`` by name order); rows without it are left out."""
    points = []
    for row in rows:
        name = section_metric(row, "error", [metric])
        value = get(row, f"metrics.{name}.value") if name else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            label = f"{get(row, 'job.dtype')}\n{get(row, 'job.preset')} {size_label(row)}"
            points.append((str(get(row, "job.device")), label, float(value)))
    return points


def error_figure(rows: Sequence[Mapping[str, Any]], model: str, metric: str) -> Any | None:
    """The figure of :func:`error_plot`, ``None`` when no row holds the error metric."""
    points = _error_points(rows, metric)
    if not points:
        return None
    bounds = bounds_by_dtype(rows, metric)
    plt = _pyplot()
    devices = sorted({p[0] for p in points})
    fig, axes = plt.subplots(1, len(devices), figsize=(max(5, 2.2 * len(points) / len(devices)) * len(devices), 4.6),
                             squeeze=False)
    for ax, device in zip(axes[0], devices, strict=True):
        mine = [p for p in points if p[0] == device]
        ax.bar(range(len(mine)), [max(p[2], 1e-30) for p in mine], label=metric)
        ax.set_xticks(range(len(mine)), [p[1] for p in mine], fontsize=7)
        ax.set(ylabel=metric, yscale="log")
        ax.set_title(device, fontsize=9)
        for i, (bound, dtypes) in enumerate(bounds.items()):
            ax.axhline(bound, color=("tab:red", "tab:orange", "tab:purple")[i % 3], linestyle="--", linewidth=1,
                       label=f"fail above {bound:g}" + (f" ({', '.join(dtypes)})" if len(bounds) > 1 else ""))
        ax.grid(True, axis="y", alpha=0.3)
        legend_below(ax)
    fig.suptitle(f"{model}: {metric} against the CPU reference", fontsize=10)
    return fig


def error_plot(rows: Sequence[Mapping[str, Any]], model: str, metric: str, out: Path) -> Path | None:
    """Bar chart of ``metric`` per dtype x preset x size (one bar per judged run: repeats are bars too), one
    panel per device (log scale), a dashed threshold line per fail bound, the legend under the panel."""
    fig = error_figure(rows, model, metric)
    return None if fig is None else _save(_pyplot(), fig, out / f"{safe_name(model)}_error.png")
