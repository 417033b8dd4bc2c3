"""Accuracy, failed-job, dry-run and environment tables: a row per record linking it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from ascendbench.digits import judged_rule
from ascendbench.report import fmt
from ascendbench.report.hidden import hidden_cell, hidden_metrics

RANDOM_MARK = "†"
RANDOM_LEGEND = (f"{RANDOM_MARK} random-init weights: the errors describe this architecture in "
                 "this dtype, not a released checkpoint.")
# Identity columns saying one thing in every row are one note (the workload column names the row).
ACCURACY_FOLDED = ("device", "dtype", "batch", "steps", "first divergent module")
# Checks that only matter when they find something: 0 and PASS in every row fold into one note.
FOLDED_WHEN_CLEAN = ("nonfinite_mismatch", "output_nonfinite", "reference_nonfinite",
                     "placement_findings")
ENV_FIELDS = (("platform", "env.platform"), ("python", "env.python"),
              ("ascendbench", "env.ascendbench"), ("CANN", "env.torch_cann"),
              ("CUDA (torch build)", "env.torch_cuda"))


def ok_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of jobs that finished ``ok`` and measured (not dry runs)."""
    return [r for r in frame.to_dict("records") if fmt.measured(r)] if "job.model" in frame else []


def random_init(row: fmt.Row) -> bool:
    """True when the job ran the architecture with seeded random weights."""
    return fmt.get(row, "weights.kind") == "random-init"


def weights_label(row: fmt.Row) -> str:
    """``loaded sha256:1234abcd…``, ``random-init (seed 42) †`` or ``missing``."""
    kind, digest = fmt.get(row, "weights.kind"), fmt.get(row, "weights.digest")
    if kind == "random-init":
        return f"random-init (seed {fmt.field(row, 'weights.init_seed')}) {RANDOM_MARK}"
    if kind is None:
        return fmt.MISSING
    return f"{fmt.text(kind)} {fmt.text(str(digest)[:19])}…" if digest else fmt.text(kind)


def reference_cell(row: fmt.Row) -> str:
    """The CPU reference precision, a saved reference's origin (``baseline.source``), or why not."""
    skipped, kind = fmt.get(row, "baseline.skipped"), fmt.get(row, "baseline.source.kind")
    if skipped is not None:
        return f"skipped: {fmt.text(skipped)}"
    if kind == "tensors":
        return f"saved file {fmt.field(row, 'baseline.source.tensors')}"
    if kind is not None:
        device, dtype, host = fmt.cells(row, [f"baseline.source.{k}" for k in ("device", "dtype",
                                                                            "host")])
        return f"saved {device} {dtype} run ({host})"
    return fmt.text(fmt.get(row, "job.reference_dtype") or fmt.get(row, "baseline.precision"))


def verdict_cell(row: fmt.Row) -> str:
    """:func:`~ascendbench.report.fmt.named_verdict`, random-init marked, or why there is none."""
    if not fmt.get(row, "verdict"):
        skipped = fmt.get(row, "baseline.skipped") is not None
        return "not judged (baseline skipped)" if skipped else fmt.MISSING
    return f"{fmt.named_verdict(row)} {RANDOM_MARK}" if random_init(row) else fmt.named_verdict(row)


def metric_cell(row: fmt.Row, name: str) -> str:
    """Value, then the verdict when judged; skipped/missing said so; random-init marked."""
    skipped = fmt.get(row, f"metrics.{name}.skipped")
    if skipped is not None:
        return f"skipped: {fmt.text(skipped)}"
    if fmt.get(row, f"metrics.{name}.value") is None:
        return "no baseline" if fmt.get(row, "baseline.skipped") is not None else fmt.MISSING
    value, verdict, _ = fmt.judged(row, f"metrics.{name}", name)
    cell = f"{value} {verdict}" if verdict else value
    return f"{cell} {RANDOM_MARK}" if random_init(row) else cell


def value_names(rows: fmt.Rows) -> list[str]:
    """Every metric (not hidden-state entry) some row holds a value of, sorted."""
    return sorted({n for r in rows for n in fmt.metric_fields(r)})


def metric_names(rows: fmt.Rows, show: Sequence[str]) -> list[str]:
    """Metric columns: those matching ``show`` (by last name part, in that order) some row holds."""
    names = value_names(rows)
    return list(dict.fromkeys(n for wanted in show for n in names if fmt.metric_matches(n, wanted)))


def rules_notes(rows: fmt.Rows, names: Sequence[str]) -> list[str]:
    """A note per judged metric, then hidden check: its rule(s), by dtype if they differ; source."""
    notes = []
    for prefix, label, name in [*(("metrics", "rule", n) for n in names),
                                *(("hidden", "rule hidden", m) for m in hidden_metrics(rows))]:
        rules: dict[str, set[str]] = {}
        source = None
        for row in rows:
            entry = {k: fmt.get(row, f"{prefix}.{name}.{k}")
                     for k in ("value", "rule", "threshold")}
            if entry["value"] is None or (entry["rule"] is None and entry["threshold"] is None):
                continue
            rules.setdefault(judged_rule(name, entry), set()).add(str(fmt.get(row, "job.dtype")))
            source = source or fmt.get(row, f"{prefix}.{name}.source")
        if not rules:
            continue
        said = (fmt.md_escape(next(iter(rules))) if len(rules) == 1 else
                "; ".join(f"{fmt.md_escape(rule)} ({fmt.md_escape(', '.join(sorted(dtypes)))})"
                          for rule, dtypes in rules.items()))
        notes.append(f"{label} {fmt.md_escape(name)}: {said}"
                     + (f" ({fmt.md_escape(source)})" if source else ""))
    return notes


def hidden_columns(rows: fmt.Rows) -> tuple[list[str], Callable[[fmt.Row], list[str]]]:
    """Headers and cells of the hidden-state checks (the worst of each), first divergent module."""
    def clean(m: str) -> bool:
        return m.endswith(FOLDED_WHEN_CLEAN) and all(
            fmt.get(r, f"hidden.{m}.value") in (0, None)
            and fmt.get(r, f"hidden.{m}.verdict") in ("PASS", None) for r in rows)

    checks = [m for m in hidden_metrics(rows) if not clean(m)]

    dumps = ["msprobe.first_flagged", "msprobe.first_divergent"]
    dumps = dumps if any(fmt.get(r, dumps[0]) for r in rows) else []

    def hidden_cells(row: fmt.Row) -> list[str]:
        return [hidden_cell(row, m) for m in checks] + [
            fmt.field(row, k) for k in ["hidden.first_divergent", *dumps]]

    if not checks and not dumps and not any(fmt.get(r, "hidden.first_divergent") for r in rows):
        return [], lambda row: []
    return [f"hidden {m} (worst)" for m in checks] + ["first divergent module"] + [
        "msprobe: first flagged row", "ascendbench: first divergent dump entry"][:len(dumps)], \
        hidden_cells


def _output_groups(names: Sequence[str], rows: fmt.Rows) -> dict[str, list[str]]:
    """Metric names by output (before ``/``): the task's primary output first, then most judged."""
    groups = fmt.group(names, lambda n: n.split("/", 1)[0] if "/" in n else "")
    judged_count = {g: sum(1 for n in members for r in rows if fmt.get(r, f"metrics.{n}.verdict"))
                    for g, members in groups.items()}
    primary = {fmt.get(r, "job.primary.output") for r in rows}
    order = sorted(groups, key=lambda g: (g not in primary, -judged_count[g], g))
    return {g: groups[g] for g in order}


def accuracy_table(rows: fmt.Rows, show: Sequence[str], base_dir: Path) -> str:
    """One model's accuracy tables, one per output; rules and shared columns as notes."""
    names = metric_names(rows, show)
    folded = [n for n in names if n.rsplit("/", 1)[-1].endswith(FOLDED_WHEN_CLEAN) and all(
        fmt.get(r, f"metrics.{n}.value") == 0 and fmt.get(r, f"metrics.{n}.verdict") == "PASS"
        for r in rows)]
    groups = _output_groups([n for n in names if n not in folded], rows)
    id_headers, id_keys = fmt.identity(rows, list(fmt.IDENTITY))
    labels = {"weights": weights_label, "reference": reference_cell}
    shared = {name: {fn(r) for r in rows} for name, fn in labels.items()}
    varying = [name for name, values in shared.items() if len(values) > 1]
    notes = [f"every row: {name} {next(iter(values))}" for name, values in shared.items()
             if len(values) == 1]
    if folded:
        notes.append("0 and PASS in every row (folded): " + ", ".join(folded))
    parts = []
    for index, (output, members) in enumerate(groups.items() or {"": []}.items()):
        hid_headers, hid_cells = hidden_columns(rows) if index == 0 else ([], lambda row: [])
        headers = [*id_headers, *varying, *(n[len(output) + 1:] if output else n for n in members),
                   *hid_headers, "verdict", "record"]
        body = [fmt.cells(row, id_keys) + [labels[v](row) for v in varying]
                + [metric_cell(row, n) for n in members] + hid_cells(row)
                + [verdict_cell(row), fmt.record_link(row, base_dir)] for row in rows]
        headers, body, same = fmt.fold_same(headers, body, ACCURACY_FOLDED)
        notes += [n for n in same if n not in notes]
        named = output or next((str(fmt.get(r, "job.primary.output")) for r in rows
                                if fmt.get(r, "job.primary.output")), "the task's output")
        parts.append((f"Output `{named}`:\n\n" if len(groups) > 1 else "") + fmt.table(headers,
                                                                                       body))
    shown = [n for members in groups.values() for n in members]
    hidden = [n for n in value_names(rows) if n not in shown
              and any(fmt.get(r, f"metrics.{n}.verdict") for r in rows)]
    skipped = Counter(f"{name}: {fmt.short(reason, 120)}" for row in rows
                      for name, reason in sorted(fmt.metric_fields(row, "skipped", True).items()))
    notes = ["Cells: the value, then the verdict as the record states it; each rule once below "
             "(its source is in the record's metrics). Columns: report.yaml accuracy.show.",
             "\"missing\": the record does not carry the value.",
             "hidden <check> (worst): the worst value over every hooked layer, call and output "
             "(largest error, smallest similarity), the worst verdict and where it sits; each "
             "layer is in the \"Hidden states per layer\" section and layers.csv."
             if hidden_metrics(rows) else None,
             *notes, *rules_notes(rows, shown),
             f"judged, not shown as columns (report.yaml accuracy.show): {', '.join(hidden)}; a "
             "FAIL among them is named in the verdict cell, and every value is in the record and "
             "records.csv." if hidden else None,
             *(f"skipped ({'every row' if n == len(rows) else f'{n} of {len(rows)} rows'})"
               f" {entry}" for entry, n in skipped.items()),
             RANDOM_LEGEND if any(random_init(r) for r in rows) else None]
    return "\n\n".join(parts) + "\n\n" + fmt.bullets(notes)


def failures_table(frame: pd.DataFrame, base_dir: Path) -> str:
    """Every record whose status is not ``ok`` (failed, interrupted, running, broken), its error."""
    rows = [] if frame.empty else frame[frame["status"] != "ok"].to_dict("records")
    if not rows:
        return "No failed, interrupted, unfinished or unreadable records."
    body = []
    for row in rows:
        error, reason = fmt.get(row, "error.type"), fmt.get(row, "error.reason")
        log_file = Path(row["job_dir"]) / "ascendbench.log"
        message = fmt.short(fmt.get(row, "error.message"))
        if fmt.get(row, "status") == "running":
            message = ("no final status: the job was killed or is still running "
                       f"(started {fmt.field(row, 'timing.started_at')})")
        dry = " (dry run)" if fmt.get(row, "run") == fmt.DRY_RUN else ""
        keys = ["job.model", "job.device", "job.dtype", "job.preset", "size"]
        body.append([fmt.field(row, "status") + dry, *fmt.cells(row, keys),
                     f"{fmt.text(error)} ({fmt.text(reason)})" if error and reason
                     else fmt.text(error),
                     message, fmt.record_link(row, base_dir),
                     fmt.link("log", log_file, base_dir) if log_file.is_file() else "none"])
    headers = ["status", "model", "device", "dtype", "preset", "size", "error", "message", "record",
               "log"]
    return fmt.table(headers, body)


def dry_runs_table(frame: pd.DataFrame, base_dir: Path) -> str:
    """Every dry-run record: what it planned; nothing in it was measured."""
    rows = ([] if frame.empty or "run" not in frame.columns
            else frame[frame["run"] == fmt.DRY_RUN].to_dict("records"))
    if not rows:
        return "No dry-run records."
    keys = ["status", "job.model", "job.device", "job.dtype", "job.preset", "size",
            "job.batch_size"]
    body = [fmt.cells(r, keys) + [fmt.record_link(r, base_dir)] for r in rows]
    headers = ["status", "model", "device", "dtype", "preset", "size", "batch", "record"]
    return fmt.table(headers, body, [
        "A dry run (`dry_run=true`) plans the job and loads nothing: it has no accuracy or "
        "performance values, so it appears in no other table. Its plan is in the record."])


def environment_table(frame: pd.DataFrame, base_dir: Path) -> str:
    """One row per machine and software stack (host, device, platform, libraries), with a record."""
    rows = [] if frame.empty else frame[frame["status"] != "broken"].to_dict("records")
    if not rows:
        return "No readable records, so no environment to show."
    libraries = sorted({k for r in rows for k in r if k.startswith("env.libraries.")})
    groups = fmt.group(rows, lambda row: (
        fmt.field(row, "env.hostname"),
        f"{fmt.field(row, 'env.device.type')}: {fmt.field(row, 'env.device.name')}",
        *fmt.cells(row, [key for _, key in ENV_FIELDS] + libraries)))
    headers = ["machine", "device", *(h for h, _ in ENV_FIELDS),
               *(k.split(".")[-1] for k in libraries)]
    body = [[*key, f"{len(members)} ({fmt.record_link(members[0], base_dir)})"]
            for key, members in groups.items()]
    return fmt.table([*headers, "records (first)"], body)
