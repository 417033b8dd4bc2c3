"""The regression gate, ``python -m ascendbench.report --compare OLD NEW`` (docs/reports.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd

from ascendbench.metrics.verdict import ORDER, worst
from ascendbench.report.fmt import DRY_RUN, cells, get, group, measured, num, short, table, text
from ascendbench.report.gather import KEY
from ascendbench.report.performance import latest
from ascendbench.report.select import from_the_future
from ascendbench.report.significance import LatencyRule, decide, latency_of

SHOWN = ["job.model", "job.device", "job.dtype", "job.preset", "size"]  # then the batch


@dataclass
class Comparison:
    """The outcome of a comparison: offending rows, what lined up, and what NEW did not measure."""

    regressions: list[list[str]]
    compared: int
    only_old: list[str]
    only_new: list[str]
    rule: LatencyRule
    unmeasured: list[str] = field(default_factory=list)  # NEW records that measured nothing: why
    measured: int = 0  # NEW records that finished ok and are not dry runs
    new_records: int = 0
    allow_missing: bool = False
    latency: list[str] = field(default_factory=list)  # one line per compared workload

    @property
    def reasons(self) -> list[str]:
        """Why the gate fails, one sentence each (empty when it passes)."""
        found = []
        if self.measured == 0:
            found.append(f"NEW measured nothing: none of its {self.new_records} record(s) is a "
                         "job that finished ok (a gate with nothing measured cannot pass)")
        elif self.compared == 0:
            found.append("no workload of NEW matches one of OLD, so nothing was compared")
        if self.only_old and not self.allow_missing:
            found.append(f"{len(self.only_old)} OLD workload(s) missing in NEW (listed below; "
                         "`--set compare.allow_missing=true` to compare a subset)")
        if self.regressions:
            found.append(f"{len(self.regressions)} regression(s)")
        return found

    @property
    def failed(self) -> bool:
        """True when a row regressed, NEW measured or matched nothing, or OLD has more."""
        return bool(self.reasons)

    def text(self) -> str:
        """The latency lines, the offending rows, what did not line up, the verdict and why."""
        lines = [f"compared {self.compared} workload(s)", self.rule.describe()]
        if self.latency:
            lines += ["latency, NEW vs OLD:"] + [f"- {line}" for line in self.latency]
        if self.regressions:
            headers = ["model", "device", "dtype", "preset", "size", "batch", "what", "old", "new"]
            lines += [f"{len(self.regressions)} regression(s):", table(headers, self.regressions)]
        if self.only_old:
            missing = "; ".join(self.only_old)
            lines.append(f"missing in NEW (OLD workloads NEW does not hold): {missing}")
        if self.unmeasured:
            lines.append("NEW records that measured nothing: " + "; ".join(self.unmeasured))
        if self.only_new:
            lines.append("only in NEW (not compared): " + "; ".join(self.only_new))
        lines.append("gate FAILED: " + "; ".join(self.reasons) if self.failed else "no regression")
        return "\n".join(lines)


def _label(row: Mapping[str, Any]) -> str:
    return f"{' '.join(cells(row, SHOWN))} b{num(get(row, 'job.batch_size'))}"


def why_unmeasured(row: Mapping[str, Any]) -> str | None:
    """Why a record measured nothing that a gate could use (None when it is a keyed job record)."""
    where = str(row.get("record"))
    if get(row, "run") == DRY_RUN:
        return f"{where}: dry run (plans only, measures nothing)"
    if from_the_future(row):
        return (f"{where}: finished {text(get(row, 'timing.finished_at'))}, in the future (a wrong "
                "clock or an edited record): not taken as its workload's latest")
    if get(row, "status") == "broken":
        return f"{where}: unreadable record ({short(get(row, 'error.message'), 160)})"
    if get(row, "job.model") is None:
        error = get(row, "error.type")
        return (f"{where}: {text(get(row, 'status'))} before its workload was known"
                + (f" ({error}: {short(get(row, 'error.message'), 160)})" if error else ""))
    return None


def _latest_by_key(frame: pd.DataFrame) -> dict[tuple, Mapping[str, Any]]:
    grouped = group((r for r in frame.to_dict("records") if why_unmeasured(r) is None),
                    lambda r: tuple(get(r, k) for k in KEY))
    return {k: latest(v) for k, v in grouped.items()}


def row_verdict(row: Mapping[str, Any]) -> Any:
    """The record's verdict, or its metrics' worst where worse (an edited PASS is no proof)."""
    claimed = get(row, "verdict")
    derived = worst(v for k, v in row.items()
                    if k.startswith("metrics.") and k.endswith(".verdict"))
    if derived is None or (claimed in ORDER and ORDER[derived] <= ORDER[claimed]):
        return claimed
    return derived


def _regressions(old: Mapping[str, Any], new: Mapping[str, Any],
                 rule: LatencyRule) -> tuple[list, str | None]:
    """(what got worse as (what, old, new) rows, the latency line or None without two medians)."""
    found = []
    if get(old, "status") == "ok" and get(new, "status") != "ok":
        found.append(("status", "ok", f"{get(new, 'status')}: {text(get(new, 'error.type'))}"))
    was, now = row_verdict(old), row_verdict(new)
    if was in ORDER and now in ORDER and ORDER[now] > ORDER[was]:
        found.append(("verdict", str(was), str(now)))
    elif was in ORDER and now not in ORDER and get(new, "status") == "ok":
        found.append(("verdict", str(was), "none (accuracy not judged)"))  # silence is no pass
    before, after = latency_of(old), latency_of(new)
    found += [("timing not believed", side, f"{side} {latency.doubt}")
              for side, latency in (("OLD", before), ("NEW", after)) if latency and latency.doubt]
    if before is not None and after is None and get(new, "status") == "ok":
        found.append(("median latency", f"{num(before.median_ms)} ms",
                      f"not measured ({text(get(new, 'bench.latency.median_ms'))})"))
    if before is None or after is None:
        return found, None
    decision = decide(before, after, rule)
    if decision.regressed:
        b, a = before.median_ms, after.median_ms
        found.append(("median latency", f"{num(b)} ms", f"{num(a)} ms ({a / b - 1:+.1%})"))
    return found, f"{_label(new)}: {decision.text()}"


def compare_frames(old: pd.DataFrame, new: pd.DataFrame, rule: LatencyRule | None = None,
                   allow_missing: bool = False) -> Comparison:
    """Line up OLD and NEW records: every row that got worse, everything NEW did not measure."""
    rule = rule or LatencyRule()
    old_rows, new_rows = _latest_by_key(old), _latest_by_key(new)
    common = [k for k in old_rows if k in new_rows]
    offending, latency = [], []
    for key in sorted(common, key=str):
        o, n = old_rows[key], new_rows[key]
        found, line = _regressions(o, n, rule)
        latency += [line] if line else []
        offending += [[*cells(n, SHOWN), num(get(n, "job.batch_size")), what, was, now]
                      for what, was, now in found]
    only = lambda a, b: sorted(_label(a[k]) for k in a if k not in b)  # noqa: E731
    new_list, old_list = (f.to_dict("records") for f in (new, old))
    unmeasured = [why for row in new_list if (why := why_unmeasured(row))]
    unmeasured += [f"OLD {why_unmeasured(row)}" for row in old_list if from_the_future(row)]
    return Comparison(offending, len(common), only(old_rows, new_rows), only(new_rows, old_rows),
                      rule, unmeasured=unmeasured, measured=sum(measured(r) for r in new_list),
                      new_records=len(new_list), allow_missing=allow_missing, latency=latency)
