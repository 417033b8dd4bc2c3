"""The Sulphur-2 seed's per-resolution table, filled from records.

The seed's README has one row per resolution preset (``Resolution | Frames | Steps | hidden MaxDiff |
hidden CosSim | PSNR | SSIM | verdict``) between ``<!-- ACCURACY_TABLE_BEGIN -->`` markers, left as
"to be filled" placeholders. Here each row is a measured job: the hidden-state columns are the worst
values over every hooked layer and call (see :mod:`ascendbench.report.hidden`), PSNR and SSIM the metrics
the job's task declares for them (``job.primary``; for older records the one unambiguous match of
``per_resolution.psnr`` / ``per_resolution.ssim`` of ``conf/report.yaml``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import MISSING, get, judged, num, table, text
from ascendbench.report.gather import TASK_PRESET_FIELDS
from ascendbench.report.meaning import section_metric
from ascendbench.report.replay import REPLAY_NOTE, is_replay, replay_hidden_cell
from ascendbench.report.tables import RANDOM_LEGEND, random_init, record_link, verdict_cell

HEADERS = ["Resolution", "Frames", "Steps", "hidden MaxDiff", "hidden CosSim", "PSNR", "SSIM", "verdict"]
_IDENTITY = (("model", "job.model"), ("device", "job.device"), ("dtype", "job.dtype"), ("batch", "job.batch_size"))


def find_metric(row: Mapping[str, Any], wanted: Sequence[str], section: str = "psnr") -> str | None:
    """The metric answering ``section`` (``psnr``, ``ssim``): the task's declared one (``job.primary``), else
    the one unambiguous match of ``wanted`` (see :mod:`ascendbench.report.meaning`)."""
    return section_metric(row, section, wanted)


def _judged(row: Mapping[str, Any], prefix: str, metric: str) -> str:
    value, verdict, _ = judged(row, prefix, metric)
    return f"{value} {verdict}" if verdict and value != MISSING else value


def metric_value_cell(row: Mapping[str, Any], wanted: Sequence[str], section: str = "psnr") -> str:
    """``value VERDICT`` of the metric answering ``section``, ``missing`` when none."""
    name = find_metric(row, wanted, section)
    if name is None and is_replay(row):
        return "-"
    if name is None:
        return MISSING
    return _judged(row, f"metrics.{name}", name)


def size_cell(row: Mapping[str, Any], key: str) -> str:
    """``job.<key>`` (``num_frames``, ``steps``); ``-`` for a task that does not use it, ``missing`` otherwise."""
    value = get(row, f"job.{key}")
    if value is not None:
        return num(value)
    task = str(get(row, "job.task") or "").rsplit(".", 1)[-1]
    return MISSING if key in TASK_PRESET_FIELDS.get(task, ()) else "-"


def hidden_value_cell(row: Mapping[str, Any], check: str) -> str:
    """``worst VERDICT`` of a hidden-state check; ``not hooked`` when the job compared no layer; for a replay job
    the worst local value over the replayed modules, labelled (:func:`ascendbench.report.replay.replay_hidden_cell`)."""
    if (replayed := replay_hidden_cell(row, check)) is not None:
        return replayed
    if get(row, "hidden.first_divergent") is None and get(row, f"hidden.{check}.value") is None:
        return "not hooked (compare.layers off)"
    return _judged(row, f"hidden.{check}", check)


def resolution_table(rows: Sequence[Mapping[str, Any]], psnr: Sequence[str], ssim: Sequence[str],
                     base_dir: Path) -> str:
    """The seed's table over measured rows (sweep order); model/device/dtype/batch columns only when they vary."""
    if not rows:
        return "No job finished ok, so there is no per-resolution accuracy to show (see the failed jobs)."
    varying = [(h, k) for h, k in _IDENTITY if len({text(get(r, k)) for r in rows}) > 1]
    body = []
    for row in rows:
        cells = [text(get(row, k)) for _, k in varying]
        cells += [f"{num(get(row, 'job.height'))}x{num(get(row, 'job.width'))}", size_cell(row, "num_frames"),
                  size_cell(row, "steps"), hidden_value_cell(row, "max_abs_err"), hidden_value_cell(row, "cosine"),
                  metric_value_cell(row, psnr, "psnr"), metric_value_cell(row, ssim, "ssim"), verdict_cell(row),
                  record_link(row, base_dir)]
        body.append(cells)
    notes = ["hidden MaxDiff / CosSim: the worst max_abs_err / cosine over every hooked layer and call; PSNR / "
             f"SSIM: the metric the task declares for them (else the one matching {list(psnr)} / {list(ssim)}); "
             "\"missing\": not in the record; "
             "\"-\": the task does not use it."]
    shared = [f"{h} {text(get(rows[0], k))}" for h, k in _IDENTITY if (h, k) not in varying]
    notes.append("every row: " + ", ".join(shared))
    if any(random_init(r) for r in rows):
        notes.append(RANDOM_LEGEND)
    if any(is_replay(r) for r in rows):
        notes.append(REPLAY_NOTE)
    headers = [h for h, _ in varying] + HEADERS + ["record"]
    return table(headers, body) + "\n\n" + "\n".join(f"- {n}" for n in notes)
