"""PNG plots (matplotlib, Agg): latency with its 95% CI vs size and batch, the error per dtype."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Callable

from ascendbench.fileio import atomic_path
from ascendbench.report import fmt
from ascendbench.report.fmt import Row, Rows, get, group, latency, num, section_metric, size_label
from ascendbench.report.performance import latest

# With this many distinct x values or fewer a panel is categorical (an evenly spaced, labelled slot
# per value) instead of a numeric axis on which one or two points sit at its edges.
CATEGORICAL_MAX = 3
REPEATS = "plot.repeats"  # the medians of a point's earlier runs (drawn, never collapsed)
Point = tuple[float, Row]


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib  # deferred: matplotlib is heavy and only needed for plots

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: as above

    return plt


def safe_name(text: str) -> str:
    """``text`` as a file name: itself when safe, else its safe part and a digest of the whole."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_") or "model"
    if safe == str(text) and len(safe) <= 80 and not safe.startswith("."):
        return safe
    digest = hashlib.sha256(str(text).encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe[:60]}_{digest}"


def _pixels(row: Row) -> float:
    frames = get(row, "job.num_frames") or 1
    return float(get(row, "job.height")) * float(get(row, "job.width")) * float(frames) / 1e6


def ci_errors(row: Row) -> tuple[float, float]:
    """How far the 95% CI of the median reaches below and above it; (0, 0) without a CI."""
    median = fmt.latency(row)
    low, high = latency(row, "median_ci95_low_ms"), latency(row, "median_ci95_high_ms")
    if median is None or low is None or high is None:
        return 0.0, 0.0
    return max(median - low, 0.0), max(high - median, 0.0)


def _series(rows: Rows, x: Callable[[Row], float], fixed: Callable[[Row], bool]
            ) -> dict[str, list[Point]]:
    chosen = [row for row in rows if fixed(row)]
    presets = group(chosen, lambda r: (str(get(r, "job.dtype")), x(r)))
    split = any(len({str(get(r, "job.preset")) for r in rs}) > 1 for rs in presets.values())
    series = group(chosen, lambda r: f"{get(r, 'job.dtype')} {get(r, 'job.preset')}" if split
                   else str(get(r, "job.dtype")))
    found = {}
    for name in sorted(series):
        points = []
        for xv, members in group(series[name], x).items():
            last = latest(members)
            earlier = [fmt.latency(r) for r in members if r is not last and fmt.latency(r)]
            points.append((xv, {**last, REPEATS: earlier}))
        found[name] = sorted(points, key=lambda p: p[0])
    return found


def draw_latency(ax: Any, series: dict[str, list[Point]], label: Callable[[Row], str],
                 colors: dict[str, str] | None = None) -> bool:
    """Medians with 95% CI bars and earlier runs, a colour per dtype; categorical for few x."""
    xs = sorted({x for pts in series.values() for x, _ in pts})
    categorical = len(xs) <= CATEGORICAL_MAX
    width = 0.6 / max(len(series), 1)
    names: dict[float, str] = {}
    for i, (name, pts) in enumerate(series.items()):
        if categorical:
            where = [xs.index(x) + (i - (len(series) - 1) / 2) * width for x, _ in pts]
            names.update((x, label(row)) for x, row in pts)
        else:
            where = [x for x, _ in pts]
        errors = [ci_errors(row) for _, row in pts]
        drawn = ax.errorbar(where, [fmt.latency(row) for _, row in pts],
                            yerr=[[e[0] for e in errors], [e[1] for e in errors]], marker="o",
                            capsize=4, label=name, linestyle="none" if categorical else "-",
                            color=(colors or {}).get(name))
        earlier = [(w, m) for w, (_, row) in zip(where, pts, strict=True)
                   for m in row.get(REPEATS) or []]
        if earlier:
            ax.plot([w for w, _ in earlier], [m for _, m in earlier], linestyle="none", marker="o",
                    markerfacecolor="none", color=drawn.lines[0].get_color(), alpha=0.6,
                    label=f"{name}: earlier runs ({len(earlier)})")
    if categorical:
        ax.set_xticks(range(len(xs)), [names[x] for x in xs])
        ax.set_xlim(-0.5 - width * len(series), len(xs) - 0.5 + width * len(series))
    return categorical


def _legend_below(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                  ncol=min(len(labels), 3), fontsize=7, frameon=False)


def _panels(rows: Rows, device: str) -> tuple[tuple, tuple]:
    """A device's two panels (series, title, x labels, slot label): by size and by batch."""
    mine = [r for r in rows if str(get(r, "job.device")) == device]
    batch = min(int(get(r, "job.batch_size")) for r in mine)
    batches = {px: {int(get(r, "job.batch_size")) for r in rs}
               for px, rs in group(mine, _pixels).items()}
    largest = max(batches, key=lambda px: (len(batches[px]), px))
    by_size = _series(mine, _pixels, lambda r: int(get(r, "job.batch_size")) == batch)
    by_batch = _series(mine, lambda r: int(get(r, "job.batch_size")),
                       lambda r: _pixels(r) == largest)
    at = size_label(next(r for r in mine if _pixels(r) == largest))
    return ((by_size, f"{device}: batch {batch}",
             ("megapixels per sample (H x W [x frames])", "size"), size_label),
            (by_batch, f"{device}: by batch at {at}", ("batch size", "batch size"),
             lambda r: f"batch {num(get(r, 'job.batch_size'))}"))


def latency_figure(rows: Rows, model: str) -> Any | None:
    """Two panels per device, a series per dtype; None with fewer than two points."""
    rows = [r for r in rows if fmt.latency(r) and get(r, "job.height") and get(r, "job.width")
            and get(r, "job.batch_size")]
    if len(rows) < 2:
        return None
    devices = sorted({str(get(r, "job.device")) for r in rows})
    fig, axes = pyplot().subplots(len(devices), 2, figsize=(10, 4.2 * len(devices)), squeeze=False)
    panels = {device: _panels(rows, device) for device in devices}
    names = sorted({name for both in panels.values() for panel in both for name in panel[0]})
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}
    for axrow, device in zip(axes, devices, strict=True):
        for ax, (series, title, xlabels, label) in zip(axrow, panels[device], strict=True):
            categorical = draw_latency(ax, series, label, colors)
            ax.set(xlabel=xlabels[categorical], ylabel="median latency (ms)", yscale="log")
            ax.set_title(title, fontsize=9)
            ax.grid(True, alpha=0.3)
            points = [row for pts in series.values() for _, row in pts]
            if len(points) == 1:
                ax.annotate(f"{num(fmt.latency(points[0]))} ms", (0, fmt.latency(points[0])),
                            textcoords="offset points", xytext=(8, 8), fontsize=8)
                ax.text(0.02, 0.95, "one measurement: no trend to read", transform=ax.transAxes,
                        fontsize=7, va="top", color="dimgray")
            _legend_below(ax)
    fig.suptitle(f"{model}: median latency per dtype\n(error bars: 95% CI of the median, where "
                 "recorded)", fontsize=10)
    return fig


def _error_points(rows: Rows, metric: str) -> list[tuple[str, str, float]]:
    points = []
    for row in rows:
        name = section_metric(row, "error", [metric])
        value = get(row, f"metrics.{name}.value") if name else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            label = f"{get(row, 'job.dtype')}\n{get(row, 'job.preset')} {size_label(row)}"
            points.append((str(get(row, "job.device")), label, float(value)))
    return points


def error_figure(rows: Rows, model: str, metric: str) -> Any | None:
    """A bar per judged run, a panel per device, a line per fail bound; None without values."""
    points = _error_points(rows, metric)
    if not points:
        return None
    bounds: dict[float, set[str]] = {}
    for row in rows:
        name = section_metric(row, "error", [metric])
        bound = get(row, f"metrics.{name}.threshold") if name else None
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound > 0:
            bounds.setdefault(float(bound), set()).add(str(get(row, "job.dtype")))
    devices = sorted({p[0] for p in points})
    width = max(5, 2.2 * len(points) / len(devices)) * len(devices)
    fig, axes = pyplot().subplots(1, len(devices), figsize=(width, 4.6), squeeze=False)
    for ax, device in zip(axes[0], devices, strict=True):
        mine = [p for p in points if p[0] == device]
        ax.bar(range(len(mine)), [max(p[2], 1e-30) for p in mine], label=metric)
        ax.set_xticks(range(len(mine)), [p[1] for p in mine], fontsize=7)
        ax.set(ylabel=metric, yscale="log")
        ax.set_title(device, fontsize=9)
        for i, bound in enumerate(sorted(bounds)):
            said = f" ({', '.join(sorted(bounds[bound]))})" if len(bounds) > 1 else ""
            ax.axhline(bound, color=("tab:red", "tab:orange", "tab:purple")[i % 3], linestyle="--",
                       linewidth=1, label=f"fail above {bound:g}{said}")
        ax.grid(True, axis="y", alpha=0.3)
        _legend_below(ax)
    fig.suptitle(f"{model}: {metric} against the CPU reference", fontsize=10)
    return fig


def save_png(fig: Any, path: Path) -> Path | None:
    """Write ``fig`` to ``path`` as a PNG and close it; None without a figure."""
    if fig is None:
        return None
    fig.tight_layout()
    with atomic_path(path) as tmp:  # a link planted as the file is replaced, not written through
        fig.savefig(tmp, dpi=100, format="png")
    pyplot().close(fig)
    return path


def latency_plot(rows: Rows, model: str, out: Path) -> Path | None:
    """``<model>_latency.png`` of :func:`latency_figure`, or None."""
    return save_png(latency_figure(rows, model), out / f"{safe_name(model)}_latency.png")


def error_plot(rows: Rows, model: str, metric: str, out: Path) -> Path | None:
    """``<model>_error.png`` of :func:`error_figure`, or None."""
    return save_png(error_figure(rows, model, metric), out / f"{safe_name(model)}_error.png")
