"""What a job returns to an optimisation sweep (``objective=latency``) and what a search's exit status counts.

A trial *passes* when its job finished ``ok`` and its verdict is PASS, or WARN unless ``fail_on=WARN``
(:func:`passes`): a FAIL verdict never passes, whatever ``fail_on`` says, and neither does a job without a
verdict (no CPU reference, nothing judged): a search names the fastest setting that is still accurate.
A passing trial returns its latency; any other returns ``+inf``, so that a minimising sampler never picks it
and the sweep goes on (:func:`objective_value`).

Exit status of a run with an objective (:func:`search_exit_status`): 0 when at least one trial passed and
every job finished ``ok``; 1 when a job did not finish (``failed``, ``interrupted``, its directory busy) or
no trial passed. A FAIL verdict of one trial is an outcome of the search, not an error of the run.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

from ascendbench.metrics.verdict import ORDER

INF = float("inf")


def _median_ms(record: Mapping[str, Any]) -> float | None:
    latency = (record.get("bench") or {}).get("latency") or {}
    value = latency.get("median_ms")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


def _median_ms_per_sample(record: Mapping[str, Any]) -> float | None:
    median, batch = _median_ms(record), (record.get("job") or {}).get("batch_size")
    return median / batch if median is not None and isinstance(batch, int) and batch > 0 else None


# objective name -> the value a passing record gives (None: the record does not carry it, the trial counts inf).
OBJECTIVES: dict[str, Callable[[Mapping[str, Any]], float | None]] = {
    "latency": _median_ms,                       # bench.latency.median_ms: one call of the timed loop
    "latency_per_sample": _median_ms_per_sample,  # that over preset.batch_size: compares batch sizes fairly
}


def passes(record: Mapping[str, Any], fail_on: str | None) -> bool:
    """Whether the job finished ``ok`` with a verdict a search may pick (PASS; WARN unless ``fail_on=WARN``).

    >>> passes({"status": "ok", "verdict": "WARN"}, "FAIL"), passes({"status": "ok", "verdict": "FAIL"}, None)
    (True, False)
    >>> passes({"status": "ok", "verdict": None}, "FAIL"), passes({"status": "failed", "verdict": None}, None)
    (False, False)
    """
    verdict = record.get("verdict")
    if record.get("status") != "ok" or verdict not in ORDER or verdict == "FAIL":
        return False
    return not (fail_on in ORDER and ORDER[verdict] >= ORDER[fail_on])


def objective_value(record: Mapping[str, Any], objective: str, fail_on: str | None) -> float:
    """The trial's value of ``objective`` (ms, lower is better), ``inf`` unless it :func:`passes`.

    >>> ok = {"status": "ok", "verdict": "PASS", "bench": {"latency": {"median_ms": 12.5}}, "job": {"batch_size": 2}}
    >>> objective_value(ok, "latency", "FAIL"), objective_value(ok, "latency_per_sample", "FAIL")
    (12.5, 6.25)
    >>> objective_value({**ok, "verdict": "FAIL"}, "latency", None)
    inf
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; one of {sorted(OBJECTIVES)}")
    value = OBJECTIVES[objective](record) if passes(record, fail_on) else None
    return INF if value is None else value


def job_outcome(status: str, record: Mapping[str, Any], objective: str | None, fail_on: str | None) -> dict[str, Any]:
    """What a job reports to its launch: ``{"status": status}``, plus ``"objective"`` (its value) when one is set.

    The app returns ``objective`` when present (a number for the sampler), else ``status``.

    >>> job_outcome("ok", {"status": "ok", "verdict": "PASS"}, None, "FAIL")
    {'status': 'ok'}
    >>> job_outcome("failed", {"status": "failed"}, "latency", "FAIL")
    {'status': 'failed', 'objective': inf}
    """
    if not objective:
        return {"status": status}
    return {"status": status, "objective": objective_value(record, str(objective), fail_on)}


def search_exit_status(outcomes: Iterable[Mapping[str, Any]]) -> int:
    """0 when some trial passed (a finite ``objective``) and every job finished ``ok``, else 1.

    ``outcomes`` are ``{"status": ..., "objective": ...}`` of every job; ``status`` is the job's gated status
    (``verdict FAIL`` counts as finished: the verdict is the search's business).

    >>> search_exit_status([{"status": "ok", "objective": 3.0}, {"status": "verdict FAIL", "objective": INF}])
    0
    >>> search_exit_status([{"status": "verdict FAIL", "objective": INF}])
    1
    """
    outcomes = list(outcomes)
    finished = all(o.get("status") == "ok" or str(o.get("status")).startswith("verdict ") for o in outcomes)
    found = any(isinstance(o.get("objective"), (int, float)) and math.isfinite(o["objective"]) for o in outcomes)
    return 0 if finished and found else 1
