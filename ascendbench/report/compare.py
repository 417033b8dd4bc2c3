"""The regression gate: ``python -m ascendbench.report --compare OLD NEW``.

Records of OLD and NEW line up by model, device, dtype, preset, batch, size, frames, steps and seed
(the latest record per key on each side). A row regresses when NEW's status or accuracy verdict is
worse than OLD's, or NEW's median latency exceeds OLD's by more than the noise fraction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from ascendbench.report.fmt import get, num, size_label, table, text
from ascendbench.report.performance import latest, median_ms

KEY = ("job.model", "job.device", "job.dtype", "job.preset", "job.batch_size", "job.height", "job.width",
       "job.num_frames", "job.steps", "job.seed")
# Higher is worse. A record without a verdict (no rule, baseline skipped) is not judged on accuracy.
VERDICT_RANK = {"PASS": 0, "WARN": 1, "FAIL": 2}


@dataclass
class Comparison:
    """The outcome of a comparison: offending rows, rows compared, keys only one side has."""

    regressions: list[list[str]]
    compared: int
    only_old: list[str]
    only_new: list[str]
    noise: float

    @property
    def failed(self) -> bool:
        """True when at least one row regressed."""
        return bool(self.regressions)

    def text(self) -> str:
        """A human-readable account: the offending rows as a table, then what did not line up."""
        lines = [f"compared {self.compared} workload(s); noise rule: median latency changes within "
                 f"{self.noise:.1%} are noise"]
        if self.regressions:
            headers = ["model", "device", "dtype", "preset", "size", "batch", "what", "old", "new"]
            lines += [f"{len(self.regressions)} regression(s):", table(headers, self.regressions)]
        else:
            lines.append("no regression")
        if self.only_old:
            lines.append("only in OLD (not compared): " + "; ".join(self.only_old))
        if self.only_new:
            lines.append("only in NEW (not compared): " + "; ".join(self.only_new))
        return "\n".join(lines)


def _key(row: Mapping[str, Any]) -> tuple:
    return tuple(get(row, k) for k in KEY)


def _label(row: Mapping[str, Any]) -> str:
    return " ".join(text(get(row, k)) for k in ("job.model", "job.device", "job.dtype", "job.preset")) + \
        f" {size_label(row)} b{num(get(row, 'job.batch_size'))}"


def _latest_by_key(frame: pd.DataFrame) -> dict[tuple, Mapping[str, Any]]:
    rows = [] if frame.empty or "job.model" not in frame.columns else frame.to_dict("records")
    grouped: dict[tuple, list] = {}
    for row in rows:
        if get(row, "job.model") is not None:
            grouped.setdefault(_key(row), []).append(row)
    return {k: latest(v) for k, v in grouped.items()}


def _regressions(old: Mapping[str, Any], new: Mapping[str, Any], noise: float) -> list[tuple[str, str, str]]:
    found = []
    if get(old, "status") == "ok" and get(new, "status") != "ok":
        found.append(("status", "ok", f"{get(new, 'status')}: {text(get(new, 'error.type'))}"))
    was, now = get(old, "verdict"), get(new, "verdict")
    if was in VERDICT_RANK and now in VERDICT_RANK and VERDICT_RANK[now] > VERDICT_RANK[was]:
        found.append(("verdict", str(was), str(now)))
    before, after = median_ms(old), median_ms(new)
    if before and after and after > before * (1 + noise):
        found.append(("median latency", f"{num(before)} ms", f"{num(after)} ms (+{after / before - 1:.1%})"))
    return found


def compare_frames(old: pd.DataFrame, new: pd.DataFrame, noise: float) -> Comparison:
    """Line up OLD and NEW records and list every row that got worse."""
    old_rows, new_rows = _latest_by_key(old), _latest_by_key(new)
    common = [k for k in old_rows if k in new_rows]
    offending = []
    for key in sorted(common, key=str):
        o, n = old_rows[key], new_rows[key]
        for what, was, now in _regressions(o, n, noise):
            offending.append([text(get(n, "job.model")), text(get(n, "job.device")), text(get(n, "job.dtype")),
                              text(get(n, "job.preset")), size_label(n), num(get(n, "job.batch_size")), what, was, now])
    only = lambda a, b: sorted(_label(a[k]) for k in a if k not in b)  # noqa: E731
    return Comparison(offending, len(common), only(old_rows, new_rows), only(new_rows, old_rows), noise)

