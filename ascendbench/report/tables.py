"""Accuracy, failed-job and environment tables, one row per record, each row linking its record."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from ascendbench.report.columns import failing_elsewhere, fold_same, judged_elsewhere, rules_notes
from ascendbench.report.fmt import (
    MISSING,
    get,
    judged,
    link,
    metric_matches,
    num,
    short,
    size_label,
    table,
    text,
    workload_label,
)
from ascendbench.report.gather import DRY_RUN
from ascendbench.report.hidden import hidden_cell, hidden_metrics
from ascendbench.report.meaning import primary_output

RANDOM_MARK = "†"
RANDOM_LEGEND = (f"{RANDOM_MARK} random-init weights: the errors describe this architecture in this dtype, "
                 "not a released checkpoint.")


def ok_rows(frame: pd.DataFrame, model: str | None = None) -> list[dict[str, Any]]:
    """Rows of jobs that finished ``ok`` and measured (not dry runs), optionally of one model, in frame order."""
    if frame.empty or "job.model" not in frame.columns:
        return []
    sel = frame[frame["status"] == "ok"]
    if "run" in sel.columns:
        sel = sel[sel["run"] != DRY_RUN]
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
    return f"{text(kind)} {text(str(digest)[:19])}…" if digest else text(kind)


def machines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Distinct host names among the rows."""
    return sorted({str(get(r, "env.hostname")) for r in rows})


def record_link(row: Mapping[str, Any], base_dir: Path) -> str:
    """Link named ``record`` to the row's record file."""
    return link("record", row["record"], base_dir)


# -- accuracy --------------------------------------------------------------------------------------

def metric_names(rows: Sequence[Mapping[str, Any]], show: Sequence[str]) -> list[str]:
    """Metric columns: those named in ``show`` (by last name part, in that order) that some row holds.

    Hidden-state entries (``layer/...``) are not columns: they are folded into one column per check.
    """
    names = value_names(rows)
    return list(dict.fromkeys(n for wanted in show for n in names if metric_matches(n, wanted)))


def value_names(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every metric (not hidden-state entry) some row holds a value of, sorted."""
    return sorted({k[len("metrics."):-len(".value")] for r in rows for k in r
                   if k.startswith("metrics.") and k.endswith(".value") and not k.startswith("metrics.layer/")
                   and get(r, k) is not None})


def judged_names(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The metrics some row carries a verdict for."""
    return [n for n in value_names(rows) if any(get(r, f"metrics.{n}.verdict") for r in rows)]


def output_groups(names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Metric names by output (the part before ``/``; ``""`` when unnamed): the task's primary output first
    (``job.primary.output``), then the most-judged."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.split("/", 1)[0] if "/" in name else "", []).append(name)
    judged = {g: sum(1 for n in members for r in rows if get(r, f"metrics.{n}.verdict"))
              for g, members in groups.items()}
    primary = {primary_output(r) for r in rows}
    return {g: groups[g] for g in sorted(groups, key=lambda g: (g not in primary, -judged[g], g))}


def skipped_metrics(row: Mapping[str, Any]) -> list[str]:
    """``name: reason`` for every metric the job recorded as skipped."""
    return [f"{k[len('metrics.'):-len('.skipped')]}: {short(row[k], 120)}" for k in sorted(row)
            if k.startswith("metrics.") and k.endswith(".skipped") and get(row, k) is not None]


def skipped_notes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One note per skipped metric and reason, saying which rows skipped it (all, or how many)."""
    seen: dict[str, int] = {}
    for row in rows:
        for entry in skipped_metrics(row):
            seen[entry] = seen.get(entry, 0) + 1
    return [f"skipped ({'every row' if n == len(rows) else f'{n} of {len(rows)} rows'}) {entry}"
            for entry, n in seen.items()]


def metric_cell(row: Mapping[str, Any], name: str) -> str:
    """Value, then the verdict when judged (the rule is a note under the table: :func:`rules_notes`);
    skipped/missing said so; random-init marked."""
    skipped = get(row, f"metrics.{name}.skipped")
    if skipped is not None:
        return f"skipped: {text(skipped)}"
    value = get(row, f"metrics.{name}.value")
    if value is None:
        return "no baseline" if get(row, "baseline.skipped") is not None else MISSING
    cell, verdict, _ = judged(row, f"metrics.{name}", name)
    if verdict:
        cell += f" {verdict}"
    return f"{cell} {RANDOM_MARK}" if random_init(row) else cell


def reference_cell(row: Mapping[str, Any]) -> str:
    """The CPU reference precision, a saved reference's origin (``baseline.source``), or why there was none."""
    skipped = get(row, "baseline.skipped")
    if skipped is not None:
        return f"skipped: {text(skipped)}"
    if get(row, "baseline.source.kind") == "tensors":
        return f"saved file {text(get(row, 'baseline.source.tensors'))}"
    if get(row, "baseline.source.kind") is not None:
        return (f"saved {text(get(row, 'baseline.source.device'))} {text(get(row, 'baseline.source.dtype'))} run "
                f"({text(get(row, 'baseline.source.host'))})")
    return text(get(row, "job.reference_dtype") or get(row, "baseline.precision"))


def verdict_cell(row: Mapping[str, Any], shown: Sequence[str] | None = None) -> str:
    """The job's overall verdict, or why it has none; with ``shown`` (the table's metric columns) a FAIL
    names the failing metrics that are not columns (``FAIL (ssim)``)."""
    verdict = get(row, "verdict")
    if verdict:
        elsewhere = failing_elsewhere(row, shown) if shown is not None and verdict == "FAIL" else []
        cell = f"{text(verdict)} ({', '.join(elsewhere)})" if elsewhere else text(verdict)
        return f"{cell} {RANDOM_MARK}" if random_init(row) else cell
    if get(row, "baseline.skipped") is not None:
        return "not judged (baseline skipped)"
    return MISSING


def steps_used(rows: Sequence[Mapping[str, Any]]) -> bool:
    """True when some row's task uses denoising / flow steps (``job.steps``)."""
    return any(get(r, "job.steps") is not None for r in rows)


CellsFn = Callable[[Mapping[str, Any]], list[str]]


def identity(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], CellsFn, list[str]]:
    """Identity headers, a row -> cells function, and notes for the columns every row shares.

    ``weights`` and ``reference`` become columns only when the rows differ in them; otherwise one note
    says it for all rows. ``workload`` is the preset with the size that ran (``mini @ 1024x1024``); ``steps``
    is a column when the task uses steps, ``machine`` with several hosts (``batch`` and ``steps`` the same in
    every row fold into a note: :func:`~ascendbench.report.columns.fold_same`).
    """
    many_hosts = len(machines(rows)) > 1
    shared = {name: {fn(r) for r in rows} for name, fn in (("weights", weights_label), ("reference", reference_cell))}
    varying = [name for name, values in shared.items() if len(values) > 1]
    notes = [f"every row: {name} {next(iter(values))}" for name, values in shared.items() if len(values) == 1]
    steps = steps_used(rows)
    headers = (["machine"] if many_hosts else []) + ["device", "dtype", "workload"]
    headers += (["steps"] if steps else []) + ["batch"] + varying

    def cells(row: Mapping[str, Any]) -> list[str]:
        out = [text(get(row, "env.hostname"))] if many_hosts else []
        out += [text(get(row, "job.device")), text(get(row, "job.dtype")), workload_label(row)]
        out += ([num(get(row, "job.steps"))] if steps else []) + [num(get(row, "job.batch_size"))]
        return out + [{"weights": weights_label, "reference": reference_cell}[name](row) for name in varying]

    return headers, cells, notes


def hidden_columns(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], CellsFn]:
    """Headers and cells of the hidden-state aggregates (one per check, plus the first divergent module)."""
    checks = [m for m in hidden_metrics(rows) if not (m.endswith(FOLDED_WHEN_CLEAN) and all(
        get(r, f"hidden.{m}.value") in (0, None) and get(r, f"hidden.{m}.verdict") in ("PASS", None) for r in rows))]
    if not checks and not any(get(r, "hidden.first_divergent") for r in rows):
        return [], lambda row: []
    headers = [f"hidden {m} (worst)" for m in checks] + ["first divergent module"]
    return headers, lambda row: [hidden_cell(row, m) for m in checks] + [text(get(row, "hidden.first_divergent"))]


# Identity columns saying one thing in every row are one note (the workload column stays: it names the row).
ACCURACY_FOLDED = ("device", "dtype", "batch", "steps", "first divergent module")
# Validation entries that only matter when they find something: a column of "0 PASS" in every row is
# folded into one note line (NaN/Inf checks, the placement check), so real-scale tables stay readable.
FOLDED_WHEN_CLEAN = ("nonfinite_mismatch", "output_nonfinite", "reference_nonfinite", "placement_findings")


def fold_clean(names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """``(kept, folded)``: the :data:`FOLDED_WHEN_CLEAN` entries that are 0 and PASS in every row are folded.

    >>> fold_clean(["mae", "video/nonfinite_mismatch"],
    ...            [{"metrics.video/nonfinite_mismatch.value": 0, "metrics.video/nonfinite_mismatch.verdict": "PASS"}])
    (['mae'], ['video/nonfinite_mismatch'])
    """
    def clean(name: str) -> bool:
        return name.rsplit("/", 1)[-1].endswith(FOLDED_WHEN_CLEAN) and all(
            get(r, f"metrics.{name}.value") == 0 and get(r, f"metrics.{name}.verdict") == "PASS" for r in rows)

    folded = [n for n in names if clean(n)]
    return [n for n in names if n not in folded], folded


def accuracy_table(rows: Sequence[Mapping[str, Any]], show: Sequence[str], base_dir: Path) -> str:
    """The accuracy tables of one model: one per output (the most judged first, with the hidden-state checks).

    Rows are jobs in sweep order; columns the job's identity, the ``show`` metrics of that output (value and
    verdict), the worst value of each hidden-state check over every hooked layer and call, the verdict (naming
    a failing metric that is no column) and the record link; the rules are notes under the tables.
    """
    names, folded = fold_clean(metric_names(rows, show), rows)
    groups = output_groups(names, rows)
    id_headers, id_cells, notes = identity(rows)
    if folded:
        notes = [*notes, "0 and PASS in every row (folded): " + ", ".join(folded)]
    parts = []
    for index, (output, names) in enumerate(groups.items() or {"": []}.items()):
        hid_headers, hid_cells = hidden_columns(rows) if index == 0 else ([], lambda row: [])
        headers = id_headers + [n[len(output) + 1:] if output else n for n in names] + hid_headers
        body = [id_cells(row) + [metric_cell(row, n) for n in names] + hid_cells(row)
                + [verdict_cell(row, names), record_link(row, base_dir)] for row in rows]
        headers, body, same = fold_same(headers + ["verdict", "record"], body, ACCURACY_FOLDED)
        notes += [n for n in same if n not in notes]
        named = output or next((str(get(r, "job.primary.output")) for r in rows if get(r, "job.primary.output")),
                               "the task's output")  # an unprefixed metric belongs to the task's only output
        title = f"Output `{named}`:\n\n" if len(groups) > 1 else ""
        parts.append(title + table(headers, body))
    shown = [n for members in groups.values() for n in members]
    extra = [n for n in (judged_elsewhere(rows, judged_names(rows), shown),) if n]
    hidden_rules = [n.replace("rule ", "rule hidden ", 1) for n in rules_notes(rows, hidden_metrics(rows), "hidden")]
    notes = [*notes, *rules_notes(rows, shown), *hidden_rules, *extra]
    return "\n\n".join(parts) + "\n\n" + "\n".join(f"- {n}" for n in accuracy_notes(rows, notes))


def accuracy_notes(rows: Sequence[Mapping[str, Any]], shared: Sequence[str]) -> list[str]:
    """The notes under the accuracy tables: how to read cells, shared columns, rules, skipped metrics, random init."""
    notes = ["Cells: the value, then the verdict as the record states it; each rule once below (its source is "
             "in the record's metrics). Columns: report.yaml accuracy.show.",
             "\"missing\": the record does not carry the value."]
    if hidden_metrics(rows):
        notes.append("hidden <check> (worst): the worst value over every hooked layer, call and output "
                     "(largest error, smallest similarity), the worst verdict and where it sits; each layer is "
                     "in the \"Hidden states per layer\" section and layers.csv.")
    notes += list(shared) + skipped_notes(rows)
    if any(random_init(r) for r in rows):
        notes.append(RANDOM_LEGEND)
    return notes


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
        status = text(get(row, "status")) + (" (dry run)" if get(row, "run") == DRY_RUN else "")
        body.append([status, text(get(row, "job.model")), text(get(row, "job.device")),
                     text(get(row, "job.dtype")), text(get(row, "job.preset")), size_label(row),
                     f"{text(error)} ({text(reason)})" if error and reason else text(error), failure_message(row),
                     record_link(row, base_dir), link("log", log_file, base_dir) if log_file.is_file() else "none"])
    return table(headers, body)


# -- dry runs --------------------------------------------------------------------------------------

def dry_runs_table(frame: pd.DataFrame, base_dir: Path) -> str:
    """Every dry-run record: what it planned and whether it would fit; nothing in it was measured."""
    rows = [] if frame.empty or "run" not in frame.columns else frame[frame["run"] == DRY_RUN].to_dict("records")
    if not rows:
        return "No dry-run records."
    headers = ["status", "model", "device", "dtype", "preset", "size", "batch", "record"]
    body = [[text(get(r, "status")), text(get(r, "job.model")), text(get(r, "job.device")), text(get(r, "job.dtype")),
             text(get(r, "job.preset")), size_label(r), num(get(r, "job.batch_size")), record_link(r, base_dir)]
            for r in rows]
    return (table(headers, body) + "\n\n- A dry run (`dry_run=true`) plans the job and loads nothing: it has no "
            "accuracy or performance values, so it appears in no other table. Its plan is in the record.")


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
