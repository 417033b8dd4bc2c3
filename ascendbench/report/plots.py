"""PNG plots (matplotlib, Agg backend): latency vs resolution and batch per dtype, error per dtype."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import get, metric_matches
from ascendbench.report.performance import latest, median_ms


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def safe_name(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_") or "model"


def _pixels(row: Mapping[str, Any]) -> float:
    frames = get(row, "job.num_frames") or 1
    return float(get(row, "job.height")) * float(get(row, "job.width")) * float(frames) / 1e6


def _series(rows: Sequence[Mapping[str, Any]], x, fixed) -> dict[str, list[tuple[float, float]]]:
    """dtype -> sorted (x, median ms) points among rows where ``fixed(row)`` holds (latest per point)."""
    points: dict[str, dict[float, list]] = {}
    for row in rows:
        if fixed(row):
            points.setdefault(str(get(row, "job.dtype")), {}).setdefault(x(row), []).append(row)
    return {d: sorted((xv, median_ms(latest(rs))) for xv, rs in pts.items()) for d, pts in sorted(points.items())}


def latency_plot(rows: Sequence[Mapping[str, Any]], model: str, out: Path) -> Path | None:
    """Median latency vs resolution (at the smallest batch) and vs batch (at the largest size), per device."""
    rows = [r for r in rows if median_ms(r) and get(r, "job.height") and get(r, "job.width")
            and get(r, "job.batch_size")]
    if not rows:
        return None
    plt = _pyplot()
    devices = sorted({str(get(r, "job.device")) for r in rows})
    fig, axes = plt.subplots(len(devices), 2, figsize=(10, 3.6 * len(devices)), squeeze=False)
    for axrow, device in zip(axes, devices, strict=True):
        mine = [r for r in rows if str(get(r, "job.device")) == device]
        batch = min(int(get(r, "job.batch_size")) for r in mine)
        largest = max(_pixels(r) for r in mine)
        panels = ((_series(mine, _pixels, lambda r, batch=batch: int(get(r, "job.batch_size")) == batch),
                   f"{device}: batch {batch}", "megapixels per sample (H x W [x frames])"),
                  (_series(mine, lambda r: int(get(r, "job.batch_size")),
                           lambda r, largest=largest: _pixels(r) == largest),
                   f"{device}: {largest:g} MP", "batch size"))
        for ax, (series, title, xlabel) in zip(axrow, panels, strict=True):
            for dtype, pts in series.items():
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=dtype)
            ax.set(title=title, xlabel=xlabel, ylabel="median latency (ms)", yscale="log")
            ax.grid(True, alpha=0.3)
            ax.legend()
    fig.suptitle(f"{model}: latency per dtype")
    return _save(plt, fig, out / f"{safe_name(model)}_latency.png")


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _error_points(rows: Sequence[Mapping[str, Any]], metric: str) -> list[tuple[str, str, float]]:
    points = []
    for row in rows:
        for key in sorted(row):
            if (key.startswith("metrics.") and key.endswith(".value")
                    and metric_matches(key[len("metrics."):-len(".value")], metric)
                    and isinstance(get(row, key), (int, float))):
                label = (f"{get(row, 'job.dtype')}\n"
                         f"{get(row, 'job.preset')} {get(row, 'job.height')}x{get(row, 'job.width')}")
                points.append((str(get(row, "job.device")), label, float(row[key])))
                break
    return points


def error_plot(rows: Sequence[Mapping[str, Any]], model: str, metric: str, out: Path) -> Path | None:
    """Bar chart of ``metric`` per dtype x preset x size, one panel per device (log scale)."""
    points = _error_points(rows, metric)
    if not points:
        return None
    plt = _pyplot()
    devices = sorted({p[0] for p in points})
    fig, axes = plt.subplots(1, len(devices), figsize=(max(5, 2.2 * len(points) / len(devices)) * len(devices), 4),
                             squeeze=False)
    for ax, device in zip(axes[0], devices, strict=True):
        mine = [p for p in points if p[0] == device]
        ax.bar(range(len(mine)), [max(p[2], 1e-30) for p in mine])
        ax.set_xticks(range(len(mine)), [p[1] for p in mine], fontsize=7)
        ax.set(title=device, ylabel=metric, yscale="log")
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{model}: {metric} against the CPU reference")
    return _save(plt, fig, out / f"{safe_name(model)}_error.png")
