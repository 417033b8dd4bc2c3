"""What a job returns to an optimisation sweep and a search's exit status (docs/search.md)."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

from ascendbench.metrics.verdict import ORDER

INF = float("inf")


def _median_ms(record: Mapping[str, Any]) -> float | None:
    value = ((record.get("bench") or {}).get("latency") or {}).get("median_ms")
    finite = isinstance(value, (int, float)) and math.isfinite(value) and value > 0
    return float(value) if finite else None


def _median_ms_per_sample(record: Mapping[str, Any]) -> float | None:
    median, batch = _median_ms(record), (record.get("job") or {}).get("batch_size")
    return median / batch if median is not None and isinstance(batch, int) and batch > 0 else None


# objective name -> the value a passing record gives (None: not in the record, the trial counts inf)
OBJECTIVES: dict[str, Callable[[Mapping[str, Any]], float | None]] = {
    "latency": _median_ms,                        # bench.latency.median_ms: one call
    "latency_per_sample": _median_ms_per_sample,  # over preset.batch_size: compares batch sizes
}


def passes(record: Mapping[str, Any], fail_on: str | None) -> bool:
    """Whether the job finished ``ok`` with a verdict a search may pick."""
    verdict = record.get("verdict")
    if record.get("status") != "ok" or verdict not in ORDER or verdict == "FAIL":
        return False
    return not (fail_on in ORDER and ORDER[verdict] >= ORDER[fail_on])


def objective_value(record: Mapping[str, Any], objective: str, fail_on: str | None) -> float:
    """The trial's ``objective`` (ms, lower is better), ``inf`` unless it :func:`passes`."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; one of {sorted(OBJECTIVES)}")
    value = OBJECTIVES[objective](record) if passes(record, fail_on) else None
    return INF if value is None else value


def job_outcome(status: str, record: Mapping[str, Any], objective: str | None,
                fail_on: str | None) -> dict[str, Any]:
    """What a job reports to its launch: ``{"status": status}``, plus its ``objective`` value."""
    if not objective:
        return {"status": status}
    return {"status": status, "objective": objective_value(record, str(objective), fail_on)}


def search_exit_status(outcomes: Iterable[Mapping[str, Any]]) -> int:
    """0 when some trial passed and every job finished (``ok`` or ``verdict ...``), else 1."""
    outcomes = list(outcomes)
    finished = all(o.get("status") == "ok" or str(o.get("status")).startswith("verdict ")
                   for o in outcomes)
    found = any(isinstance(o.get("objective"), (int, float)) and math.isfinite(o["objective"])
                for o in outcomes)
    return 0 if finished and found else 1
