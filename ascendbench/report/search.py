"""The best passing trial of an optimisation sweep (``objective`` set, ``+search=...``), for ``summary.md``.

Computed from the records in the sweep dir, with the same rule as the value each job returned to the
sampler (:func:`ascendbench.job.objective.objective_value`): a trial whose verdict is FAIL, that has no
verdict or whose job did not finish ``ok`` is never named, whatever the sampler's own
``optimization_results.yaml`` says.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import yaml

from ascendbench.fileio import write_atomic
from ascendbench.job.objective import objective_value
from ascendbench.report.fmt import link, num

SECTION = "## Best passing trial"


@dataclass
class Trial:
    """One trial of a search, read back from its record.

    Attributes:
        record: path of its ``record.json``.
        overrides: the overrides that made it (``<job dir>/.hydra/overrides.yaml``), or its directory name.
        value: its objective value (``inf`` unless it passed).
        median_ms: the median latency of its timed loop, when measured.
        verdict: its verdict (``None`` when nothing was judged).
    """

    record: str
    overrides: list[str]
    value: float
    median_ms: float | None
    verdict: str | None


def job_overrides(job_dir: Path) -> list[str]:
    """The overrides Hydra composed the job with, ``+search=`` and the like included; else the dir name's."""
    try:
        return [str(o) for o in yaml.safe_load((job_dir / ".hydra" / "overrides.yaml").read_text()) or []]
    except (OSError, yaml.YAMLError):
        return job_dir.name.split(",")


def read_trial(row: Mapping[str, Any], objective: str, fail_on: str | None) -> Trial:
    """The trial of one summary row (its record read again: the value is computed as the job computed it)."""
    try:
        record = json.loads(Path(row["record"]).read_text())
    except (OSError, ValueError):
        record = {"status": "unreadable"}
    median = ((record.get("bench") or {}).get("latency") or {}).get("median_ms")
    return Trial(str(row["record"]), job_overrides(Path(row["job_dir"])), objective_value(record, objective, fail_on),
                 median, record.get("verdict"))


def trials(frame: pd.DataFrame, objective: str, fail_on: str | None) -> list[Trial]:
    """Every record of the sweep as a :class:`Trial`, in the summary's order."""
    return [read_trial(row, objective, fail_on) for row in frame.to_dict("records")]


def best_trial(found: list[Trial]) -> Trial | None:
    """The passing trial with the lowest objective value (the first of equals), or ``None`` when none passed."""
    passing = [t for t in found if math.isfinite(t.value)]
    return min(passing, key=lambda t: t.value) if passing else None


def search_markdown(found: list[Trial], objective: str, sweep_dir: Path) -> str:
    """The ``summary.md`` section naming the best passing trial (or saying that none passed)."""
    passed = sum(math.isfinite(t.value) for t in found)
    head = f"{SECTION} (objective `{objective}`, lower is better)\n\n"
    rule = ("A trial passes when its job finished ok and its verdict is PASS, or WARN unless `fail_on=WARN`; "
            "FAIL verdicts, unjudged and failed jobs count as inf.")
    best = best_trial(found)
    if best is None:
        return f"{head}No trial passed ({len(found)} record(s)): nothing to name. {rule}\n"
    return (f"{head}`{' '.join(best.overrides)}`: {num(best.value)} ms (median {num(best.median_ms)} ms, verdict "
            f"{best.verdict}), {link('record', best.record, sweep_dir)}.\n\n"
            f"{passed} of {len(found)} record(s) passed. {rule} This trial alone (a single run, no `-m`): "
            f"`python -m ascendbench {' '.join(shlex.quote(o) for o in best.overrides)}`.\n")


def best_line(found: list[Trial], objective: str) -> str:
    """One log line: the best passing trial's overrides, value and record, or that none passed."""
    best = best_trial(found)
    if best is None:
        return f"search: no trial passed ({len(found)} record(s)); nothing to name"
    return f"search: best passing trial {' '.join(best.overrides)}: {objective} {num(best.value)} ms ({best.record})"


def append_search(frame: pd.DataFrame, md_path: Path, objective: str, fail_on: str | None) -> str:
    """Append the best-trial section to ``md_path`` (the sweep's ``summary.md``); return :func:`best_line`."""
    found = trials(frame, objective, fail_on)
    md_path = Path(md_path)
    write_atomic(md_path, md_path.read_text() + "\n" + search_markdown(found, objective, md_path.parent))
    return best_line(found, objective)
