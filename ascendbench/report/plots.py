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
    return {d: sorted(((xv, latest(rs)) for xv, rs in pts.items()), key=lambda p: p[0])
            for d, pts in sorted(points.items())}


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
        ax.errorbar(where, medians, yerr=errors, marker="o", capsize=4, label=dtype,
                    linestyle="none" if categorical else "-")
    if categorical:
        ax.set_xticks(range(len(xs)), [names[x] for x in xs])
        ax.set_xlim(-0.5 - width * len(series), len(xs) - 0.5 + width * len(series))
    return categorical


def latency_plot(rows: Sequence[Mapping[str, Any]], model: str, out: Path) -> Path | None:
    """Median latency (with its 95% CI) vs resolution at the smallest batch and vs batch at the largest size.

    One row of two panels per device, one series per dtype (per dtype and preset where presets share a size and
    batch); see :func:`draw_latency` for the axes.
    """
    rows = [r for r in rows if median_ms(r) and get(r, "job.height") and get(r, "job.width")
            and get(r, "job.batch_size")]
    if not rows:
        return None
    plt = _pyplot()
    devices = sorted({str(get(r, "job.device")) for r in rows})
    fig, axes = plt.subplots(len(devices), 2, figsize=(10, 3.6 * len(devices)), squeeze=False)
    for axrow, device in zip(axes, devices, strict=True):
        for ax, (series, title, xlabels, label) in zip(axrow, _panels(rows, device), strict=True):
            categorical = draw_latency(ax, series, label)
            ax.set(title=title, xlabel=xlabels[categorical], ylabel="median latency (ms)", yscale="log")
            ax.grid(True, alpha=0.3)
            ax.legend()
    fig.suptitle(f"{model}: median latency per dtype (error bars: 95% CI of the median, where recorded)")
    return _save(plt, fig, out / f"{safe_name(model)}_latency.png")


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


def _bound(rows: Sequence[Mapping[str, Any]], metric: str) -> float | None:
    """The fail bound every row's error metric was judged by (one number), for the threshold line."""
    bounds = {get(r, f"metrics.{name}.threshold") for r in rows if (name := section_metric(r, "error", [metric]))}
    bounds.discard(None)
    return float(bounds.pop()) if len(bounds) == 1 else None


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


def error_plot(rows: Sequence[Mapping[str, Any]], model: str, metric: str, out: Path) -> Path | None:
    """Bar chart of ``metric`` per dtype x preset x size, one panel per device (log scale)."""
    points = _error_points(rows, metric)
    if not points:
        return None
    bound = _bound(rows, metric)
    plt = _pyplot()
    devices = sorted({p[0] for p in points})
    fig, axes = plt.subplots(1, len(devices), figsize=(max(5, 2.2 * len(points) / len(devices)) * len(devices), 4),
                             squeeze=False)
    for ax, device in zip(axes[0], devices, strict=True):
        mine = [p for p in points if p[0] == device]
        ax.bar(range(len(mine)), [max(p[2], 1e-30) for p in mine])
        ax.set_xticks(range(len(mine)), [p[1] for p in mine], fontsize=7)
        ax.set(title=device, ylabel=metric, yscale="log")
        if bound is not None and bound > 0:
            ax.axhline(bound, color="tab:red", linestyle="--", linewidth=1, label=f"fail above {bound:g}")
            ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{model}: {metric} against the CPU reference")
    return _save(plt, fig, out / f"{safe_name(model)}_error.png")
