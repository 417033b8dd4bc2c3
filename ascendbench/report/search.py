"""The best passing trial of an optimisation sweep for ``summary.md``, by the sampler's rule."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ascendbench.fileio import write_atomic
from ascendbench.job.objective import objective_value
from ascendbench.report.fmt import link, num, yaml_strings

SECTION = "## Best passing trial"


class Trial(NamedTuple):
    """A trial: record, overrides, objective value (``inf`` unless it passed), median, verdict."""

    record: str
    overrides: list[str]
    value: float
    median_ms: float | None
    verdict: str | None


def trials(frame: pd.DataFrame, objective: str, fail_on: str | None) -> list[Trial]:
    """Every record of the sweep as a :class:`Trial`, its value computed as the job did."""
    found = []
    for row in frame.to_dict("records"):
        job_dir = Path(row["job_dir"])
        try:
            record = json.loads(Path(row["record"]).read_text())
        except (OSError, ValueError):
            record = {"status": "unreadable"}
        overrides = yaml_strings(job_dir / ".hydra" / "overrides.yaml")
        overrides = job_dir.name.split(",") if overrides is None else overrides
        median = ((record.get("bench") or {}).get("latency") or {}).get("median_ms")
        value = objective_value(record, objective, fail_on)
        found.append(Trial(str(row["record"]), overrides, value, median, record.get("verdict")))
    return found


def best_trial(found: list[Trial]) -> Trial | None:
    """The passing trial with the lowest objective value (the first of equals), or ``None``."""
    passing = [t for t in found if math.isfinite(t.value)]
    return min(passing, key=lambda t: t.value) if passing else None


def search_markdown(found: list[Trial], objective: str, sweep_dir: Path) -> str:
    """The ``summary.md`` section naming the best passing trial (or saying that none passed)."""
    head = f"{SECTION} (objective `{objective}`, lower is better)\n\n"
    rule = ("A trial passes when its job finished ok and its verdict is PASS, or WARN unless "
            "`fail_on=WARN`; FAIL verdicts, unjudged and failed jobs count as inf.")
    best = best_trial(found)
    if best is None:
        return f"{head}No trial passed ({len(found)} record(s)): nothing to name. {rule}\n"
    passed = sum(math.isfinite(t.value) for t in found)
    return (f"{head}`{' '.join(best.overrides)}`: {num(best.value)} ms (median "
            f"{num(best.median_ms)} ms, verdict {best.verdict}), "
            f"{link('record', best.record, sweep_dir)}.\n\n{passed} of {len(found)} record(s) "
            f"passed. {rule} This trial alone (a single run, no `-m`): `python -m ascendbench "
            f"{' '.join(shlex.quote(o) for o in best.overrides)}`.\n")


def append_search(frame: pd.DataFrame, md_path: Path, objective: str, fail_on: str | None) -> str:
    """Append the best-trial section to the sweep's ``summary.md``; return a log line naming it."""
    found = trials(frame, objective, fail_on)
    md_path = Path(md_path)
    write_atomic(md_path, md_path.read_text() + "\n" + search_markdown(found, objective,
                                                                       md_path.parent))
    best = best_trial(found)
    if best is None:
        return f"search: no trial passed ({len(found)} record(s)); nothing to name"
    return (f"search: best passing trial {' '.join(best.overrides)}: {objective} "
            f"{num(best.value)} ms ({best.record})")
