"""The columns of the general accuracy and performance tables: which ones (``report.yaml``
``accuracy.show`` / ``performance.show``), identity columns that say the same in every row folded into one
note, and each judged metric's rule said once under the table instead of in every cell.

A compact table pastes into a README: the defaults keep the tables at or under :data:`COMPACT_COLUMNS`
columns for a sweep over device, dtype, workload and batch; ``performance.show=[all]`` brings every
latency statistic back.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ascendbench.digits import judged_rule
from ascendbench.errors import ReportError
from ascendbench.report.fmt import entry_of, get, md_escape

COMPACT_COLUMNS = 10
# performance.show names -> (header, record key or None for a cell built from several keys)
PERF_VALUES: dict[str, tuple[str, str | None]] = {
    "median_ms": ("median ms", "bench.latency.median_ms"), "min_ms": ("min ms", "bench.latency.min_ms"),
    "p90_ms": ("p90 ms", "bench.latency.p90_ms"), "p95_ms": ("p95 ms", "bench.latency.p95_ms"),
    "max_ms": ("max ms", "bench.latency.max_ms"), "mean_ms": ("mean ms", "bench.latency.mean_ms"),
    "std_ms": ("std ms", "bench.latency.std_ms"), "timed": ("timed", "bench.latency.count"),
    "cold_ms": ("cold ms", "bench.cold_ms"), "throughput": ("throughput", None),
    "memory": ("peak memory MB", None), "load_s": ("load s", None), "flops": ("FLOPs / MFU", None),
    "speedup": ("speed-up vs CPU", None),
}
ALL = "all"


def perf_show(show: Iterable[Any]) -> list[str]:
    """The ``performance.show`` names in order (``all``: every column of :data:`PERF_VALUES`).

    Raises:
        ReportError: a name is not one of :data:`PERF_VALUES` (nor ``all``), or the list is empty.
    """
    names = [str(n) for n in show]
    if ALL in names:
        return list(PERF_VALUES)
    unknown = [n for n in names if n not in PERF_VALUES]
    if unknown or not names:
        raise ReportError(f"report option performance.show={names!r} names {', '.join(unknown) or 'no column'}: "
                          f"give a list of {', '.join(PERF_VALUES)} (or [all]), e.g. "
                          "`--set 'performance.show=[median_ms,p90_ms,throughput,memory]'`.")
    return list(dict.fromkeys(names))


def fold_same(headers: list[str], body: list[list[str]], foldable: Sequence[str]
              ) -> tuple[list[str], list[list[str]], list[str]]:
    """Drop the ``foldable`` columns that hold one value in every row; the note ``every row: batch 1``
    says it once. A table of one row keeps its columns (the note would be the whole row)."""
    if len(body) < 2:
        return headers, body, []
    drop = [i for i, h in enumerate(headers) if h in foldable and len({row[i] for row in body}) == 1]
    keep = [i for i in range(len(headers)) if i not in drop]
    notes = [f"every row: {headers[i]} {body[0][i]}" for i in drop]
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in body], notes


def rules_notes(rows: Sequence[Mapping[str, Any]], names: Sequence[str], prefix: str = "metrics") -> list[str]:
    """One note per judged metric: its rule(s) as the records state them, with the dtypes each applies to
    where the rule differs by dtype, and the rule's source (``mean_rel_err: <= 1% (FLUX.2 seed)``)."""
    notes = []
    for name in names:
        rules: dict[str, set[str]] = {}
        source = None
        for row in rows:
            entry = entry_of(row, f"{prefix}.{name}")
            if entry["value"] is None or (entry["rule"] is None and entry["threshold"] is None):
                continue
            rules.setdefault(judged_rule(name, entry), set()).add(str(get(row, "job.dtype")))
            source = source or get(row, f"{prefix}.{name}.source")
        if not rules:
            continue
        said = (md_escape(next(iter(rules))) if len(rules) == 1 else  # rule text and source are record text
                "; ".join(f"{md_escape(rule)} ({md_escape(', '.join(sorted(dtypes)))})"
                          for rule, dtypes in rules.items()))
        notes.append(f"rule {md_escape(name)}: {said}" + (f" ({md_escape(source)})" if source else ""))
    return notes


def failing_elsewhere(row: Mapping[str, Any], shown: Sequence[str]) -> list[str]:
    """The row's metrics judged FAIL that are not columns of the table (so the verdict cell names them)."""
    return sorted(k[len("metrics."):-len(".verdict")] for k in row
                  if k.startswith("metrics.") and k.endswith(".verdict") and get(row, k) == "FAIL"
                  and k[len("metrics."):-len(".verdict")] not in shown and not k.startswith("metrics.layer/"))


def judged_elsewhere(rows: Sequence[Mapping[str, Any]], names: Sequence[str], shown: Sequence[str]) -> str | None:
    """The note naming the judged metrics that ``accuracy.show`` leaves out (their verdicts are in the
    verdict column; the record has their values)."""
    hidden = [n for n in names if n not in shown]
    if not hidden:
        return None
    return (f"judged, not shown as columns (report.yaml accuracy.show): {', '.join(hidden)}; a FAIL among them is "
            "named in the verdict cell, and every value is in the record and records.csv.")
