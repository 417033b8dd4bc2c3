"""Accuracy, failed-job and environment tables, one row per record, each row linking its record."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from ascendbench.report.fmt import MISSING, get, link, metric_matches, num, short, size_label, table, text

RANDOM_MARK = "†"
RANDOM_LEGEND = (f"{RANDOM_MARK} random-init weights: the errors describe this architecture in this dtype, "
                 "not a released checkpoint.")


def ok_rows(frame: pd.DataFrame, model: str | None = None) -> list[dict[str, Any]]:
    """Rows of jobs that finished ``ok`` (optionally of one model), in the frame's order."""
    if frame.empty or "job.model" not in frame.columns:
        return []
    sel = frame[frame["status"] == "ok"]
    if model is not None:
        sel = sel[sel["job.model"] == model]
    return sel.to_dict("records")


def models(frame: pd.DataFrame) -> list[str]:
    """Models with at least one ``ok`` record, sorted."""
    return sorted({str(r["job.model"]) for r in ok_rows(frame) if get(r, "job.model") is not None})


def random_init(row: Mapping[str, Any]) -> bool:
    """True when the job ran the architecture with seeded random weights."""
    return get(row, "weights.kind") == "random-init"


def weights_label(row: Mapping[str, Any]) -> str:
    """``loaded sha256:1234abcd…``, ``random-init (seed 42) †`` or ``missing``."""
    kind = get(row, "weights.kind")
    if kind == "random-init":
        return f"random-init (seed {num(get(row, 'weights.init_seed'))}) {RANDOM_MARK}"
    if kind is None:
        return MISSING
    digest = get(row, "weights.digest")
    return f"{kind} {str(digest)[:19]}…" if digest else str(kind)


def machines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Distinct host names among the rows."""
    return sorted({str(get(r, "env.hostname")) for r in rows})


def record_link(row: Mapping[str, Any], base_dir: Path) -> str:
    """Link named ``record`` to the row's record file."""
    return link("record", row["record"], base_dir)


# -- accuracy --------------------------------------------------------------------------------------

def metric_names(rows: Sequence[Mapping[str, Any]], show: Sequence[str]) -> list[str]:
    """Metric columns: those named in ``show`` (by last name part, in that order), then any with a verdict."""
    names = sorted({k[len("metrics."):-len(".value")] for r in rows for k in r
                    if k.startswith("metrics.") and k.endswith(".value") and get(r, k) is not None})
    judged = [n for n in names if any(get(r, f"metrics.{n}.verdict") for r in rows)]
    ordered = list(dict.fromkeys(n for wanted in show for n in names if metric_matches(n, wanted)))
    return ordered + [n for n in judged if n not in ordered]


def skipped_metrics(row: Mapping[str, Any]) -> list[str]:
    """``name: reason`` for every metric the job recorded as skipped."""
    return [f"{k[len('metrics.'):-len('.skipped')]}: {short(row[k], 120)}" for k in sorted(row)
            if k.startswith("metrics.") and k.endswith(".skipped") and get(row, k) is not None]


def metric_cell(row: Mapping[str, Any], name: str) -> str:
    """Value, then verdict and rule when judged; skipped/missing said so; random-init marked."""
    skipped = get(row, f"metrics.{name}.skipped")
    if skipped is not None:
        return f"skipped: {skipped}"
    value = get(row, f"metrics.{name}.value")
    if value is None:
        return "no baseline" if get(row, "baseline.skipped") is not None else MISSING
    cell = num(value)
    verdict = get(row, f"metrics.{name}.verdict")
    if verdict:
        rule = get(row, f"metrics.{name}.rule") or get(row, f"metrics.{name}.threshold")
        cell += f" {verdict} ({text(rule)})"
    return f"{cell} {RANDOM_MARK}" if random_init(row) else cell


def reference_cell(row: Mapping[str, Any]) -> str:
    """The CPU reference precision, or why there was none."""
    skipped = get(row, "baseline.skipped")
    if skipped is not None:
        return f"skipped: {skipped}"
    return text(get(row, "job.reference_dtype") or get(row, "baseline.precision"))


def verdict_cell(row: Mapping[str, Any]) -> str:
    """The job's overall verdict, or why it has none."""
    verdict = get(row, "verdict")
    if verdict:
        return f"{verdict} {RANDOM_MARK}" if random_init(row) else str(verdict)
    if get(row, "baseline.skipped") is not None:
        return "not judged (baseline skipped)"
    return MISSING


def accuracy_table(rows: Sequence[Mapping[str, Any]], show: Sequence[str], base_dir: Path) -> str:
    """The accuracy table of one model: rows device x dtype x preset x size, metric columns, verdict."""
    names = metric_names(rows, show)
    many_hosts = len(machines(rows)) > 1
    any_skipped = any(skipped_metrics(r) for r in rows)
    headers = (["machine"] if many_hosts else []) + ["device", "dtype", "preset", "size", "batch", "weights",
                                                     "reference"] + names + ["verdict"]
    headers += (["skipped metrics"] if any_skipped else []) + ["record"]
    body = []
    for row in rows:
        cells = [text(get(row, "env.hostname"))] if many_hosts else []
        cells += [text(get(row, "job.device")), text(get(row, "job.dtype")), text(get(row, "job.preset")),
                  size_label(row), num(get(row, "job.batch_size")), weights_label(row), reference_cell(row)]
        cells += [metric_cell(row, n) for n in names] + [verdict_cell(row)]
        cells += (["; ".join(skipped_metrics(row)) or "none"] if any_skipped else []) + [record_link(row, base_dir)]
        body.append(cells)
    notes = ["Cells: the value, then the verdict and its rule as the record states them (the rule's source "
             "is in the record's metrics).", "\"missing\": the record does not carry the value."]
    if any(random_init(r) for r in rows):
        notes.append(RANDOM_LEGEND)
    return table(headers, body) + "\n\n" + "\n".join(f"- {n}" for n in notes)


# -- failed jobs -----------------------------------------------------------------------------------

def failure_message(row: Mapping[str, Any]) -> str:
    """What went wrong, from the record (or why the record says nothing final)."""
    status = get(row, "status")
    if status == "running":
        return (f"no final status: the job was killed or is still running "
                f"(started {text(get(row, 'timing.started_at'))})")
    return short(get(row, "error.message"))


def failures_table(frame: pd.DataFrame, base_dir: Path) -> str:
    """Every record whose status is not ``ok`` (failed, interrupted, running, broken) with its error."""
    rows = [] if frame.empty else frame[frame["status"] != "ok"].to_dict("records")
    if not rows:
        return "No failed, interrupted, unfinished or unreadable records."
    headers = ["status", "model", "device", "dtype", "preset", "size", "error", "message", "record", "log"]
    body = []
    for row in rows:
        error = get(row, "error.type")
        reason = get(row, "error.reason")
        log_file = Path(row["job_dir"]) / "ascendbench.log"
        body.append([text(get(row, "status")), text(get(row, "job.model")), text(get(row, "job.device")),
                     text(get(row, "job.dtype")), text(get(row, "job.preset")), size_label(row),
                     f"{error} ({reason})" if error and reason else text(error), failure_message(row),
                     record_link(row, base_dir), link("log", log_file, base_dir) if log_file.is_file() else "none"])
    return table(headers, body)


# -- environment -----------------------------------------------------------------------------------

ENV_FIELDS = (("platform", "env.platform"), ("python", "env.python"), ("ascendbench", "env.ascendbench"),
              ("CANN", "env.torch_cann"), ("CUDA (torch build)", "env.torch_cuda"))


def environment_table(frame: pd.DataFrame, base_dir: Path) -> str:
    """One row per machine and software stack (host, device, platform, libraries), with a record each."""
    rows = [] if frame.empty else frame[frame["status"] != "broken"].to_dict("records")
    if not rows:
        return "No readable records, so no environment to show."
    libraries = sorted({k for r in rows for k in r if k.startswith("env.libraries.")})
    headers = ["machine", "device"] + [h for h, _ in ENV_FIELDS] + [k.split(".")[-1] for k in libraries]
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        cells = [text(get(row, "env.hostname")),
                 f"{text(get(row, 'env.device.type'))}: {text(get(row, 'env.device.name'))}"]
        cells += [text(get(row, key)) for _, key in ENV_FIELDS] + [text(get(row, k)) for k in libraries]
        groups.setdefault(tuple(cells), []).append(row)
    body = [list(cells) + [f"{len(members)} ({record_link(members[0], base_dir)})"]
            for cells, members in groups.items()]
    return table(headers + ["records (first)"], body)
