"""The spread between runs: a workload's earlier medians on this host, and the interval they give a rerun.

Blocks of one run (:mod:`ascendbench.bench.blocks`) see the host's level move only while the run lasts. A shared
host also switches state between runs: measured on the 2-core CI host, a 1 ms matmul timed steadily for 0.1-0.3 s
(every block agreeing within 1%) had its next 400-call run land 3% to 15% away in about one round in ten. No
statistic of a short run can know that; the runs themselves can (pyperf's answer: values from several processes
spread over time). So every timed run of a workload leaves its median (and its own interval's half-width) in a
small history file, and the next run of the same workload on the same host is given a third interval,
**between_runs**::

    median * exp(+- t(0.975, m - 1) * sqrt(2 * s_L^2 + se^2))

over the logs of ``m`` medians, this run's and up to ``keep - 1`` earlier ones (at least ``MIN_EARLIER``). ``s_L^2
= max(0, s_R^2 - mean(se_j^2))`` is the spread of the host's level between runs: the variance of the medians' logs
net of each run's own sampling variance (``se_j``: its ``within`` 95% half-width / 1.96, the order statistics of
its calls; the same random-effects split as the level term between blocks). The ``between`` interval of a run is
not its sampling error: it holds the level's movement during the run, for a rerun, and used here it hid the
movement between runs (measured: +-15% between runs read as a level term of 0). ``2 * s_L^2``: a rerun and this run
each sit at their own level; ``se^2``: this run's own error. On a host that holds its level, ``s_L`` is 0 and the
interval is this run's own; on one that switches between runs it is the rerun's (the textbook prediction interval
for a new value: 96% on normal levels with 3 to 10 medians, simulated in the tests). One run during a burst widens
the interval for the next ``keep`` runs: the host did move that far. No count of calls in this run narrows the
level part: when it alone exceeds ``bench.precision`` and the runs disagree beyond chance (``s_R^2 / mean(se^2)``
above the 99% point of chi^2(m - 1) / (m - 1), kept as ``blocks_disagree``), the stop rule says ``runs`` once this
run's ``within`` interval is within half of the between-runs one.

The history is data: a file that is not JSON, holds another workload's key, or an entry that is not a finite
positive number with a time is ignored (entries) or set aside with a warning (the file). The file's name is the
workload key's digest, never a path taken from data; a forged history can only widen an interval (the honest
one is the widest) or end a run early with reason ``runs``, never narrow the claim.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.bench.blocks import Interval, t975
from ascendbench.fileio import read_regular, write_atomic

log = logging.getLogger(__name__)

# Earlier runs a between-runs interval needs (with this run: 3 medians, 2 degrees of freedom).
MIN_EARLIER = 2
# A history file larger than this is not read (a run adds ~80 bytes; ``keep`` bounds what is written).
MAX_FILE_BYTES = 1 << 20
FORMAT = 1
_Z975 = statistics.NormalDist().inv_cdf(0.975)
_Z99 = statistics.NormalDist().inv_cdf(0.99)


@dataclass(frozen=True)
class PastRun:
    """One run of the workload: its median and its own interval's relative half-width (within or between)."""

    median_ms: float
    own_rel_half_width: float


def _se(rel_half_width: float) -> float:
    """The standard error of a median's log from its 95% relative half-width."""
    return math.log1p(max(0.0, rel_half_width)) / _Z975


def runs_interval(earlier: Sequence[PastRun], median: float, own_rel_half_width: float) -> Interval | None:
    """The between-runs 95% interval of a rerun's median around ``median`` (this run's, whose ``within``
    interval is ``own_rel_half_width``), from earlier runs of the same workload; None with fewer than ``MIN_EARLIER`` of
    them, a median not > 0, or an own half-width that is not a finite number.

    >>> found = runs_interval([PastRun(1.0, 0.01), PastRun(1.05, 0.01), PastRun(0.98, 0.01)], 1.0, 0.01)
    >>> round(found.rel_half_width, 4), found.method
    (0.1401, 't on 4 run medians (this run and 3 earlier ones), net of their own errors')
    """
    if len(earlier) < MIN_EARLIER or median <= 0 or not math.isfinite(own_rel_half_width):
        return None
    logs = [math.log(r.median_ms / median) for r in earlier] + [0.0]
    own = [_se(r.own_rel_half_width) for r in earlier] + [_se(own_rel_half_width)]
    spread, chance = statistics.variance(logs), statistics.fmean(se * se for se in own)
    level = max(0.0, spread - chance)
    half = t975(len(logs) - 1) * math.sqrt(2.0 * level + own[-1] ** 2)
    return Interval(median * math.exp(-half), median * math.exp(half), math.expm1(half),
                    f"t on {len(logs)} run medians (this run and {len(earlier)} earlier ones), net of their own "
                    "errors", level_rel_half_width=math.expm1(t975(len(logs) - 1) * math.sqrt(2.0 * level)),
                    blocks_disagree=spread > chance * chi2_ratio_99(len(logs) - 1))


def runs_level_variance(interval: Any) -> float:
    """The variance (of the log of a run's median) of the host's level between runs, as a record's
    ``bench.interval.between_runs`` states it: ``s_L^2`` of :func:`runs_interval`, recovered from its
    ``level_rel_half_width`` and the number of run medians; 0 without one, or when its numbers are not sensible
    (a record is data).

    >>> found = runs_interval([PastRun(1.0, 0.01), PastRun(1.05, 0.01), PastRun(0.98, 0.01)], 1.0, 0.01)
    >>> section = {"between_runs": {"level_rel_half_width": found.level_rel_half_width, "earlier_ms": [1.0] * 3}}
    >>> round(runs_level_variance(section) ** 0.5, 4)  # sd of the medians' logs net of their own errors
    0.0289
    """
    runs = interval.get("between_runs") if isinstance(interval, Mapping) else None
    if not isinstance(runs, Mapping):
        return 0.0
    level, earlier = runs.get("level_rel_half_width"), runs.get("earlier_ms")
    if not _finite(level) or level < 0 or not isinstance(earlier, list) or len(earlier) < MIN_EARLIER:
        return 0.0
    return (math.log1p(level) / t975(len(earlier))) ** 2 / 2.0


def chi2_ratio_99(dof: int) -> float:
    """The 99% point of chi^2(dof) / dof (Wilson-Hilferty; at most 0.2% above the exact one for dof >= 2).

    >>> round(chi2_ratio_99(9), 3)
    2.411
    """
    c = 2.0 / (9.0 * dof)
    return (1.0 - c + _Z99 * math.sqrt(c)) ** 3


def workload_key(material: Mapping[str, Any]) -> str:
    """The digest naming a workload's history file: sha256 of ``material`` as sorted JSON (first 32 hex digits)."""
    text = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RunHistory:
    """The medians of one workload's earlier runs on this host, in ``folder/<key>.json``.

    Attributes:
        folder: where history files live (``bench.history.dir``).
        material: what identifies the workload (the job's model, device, dtype and preset, versions, host);
            its digest names the file and is checked on read.
        keep: medians used at most (this run's included); older ones are dropped when a run is added.
        max_age_s: earlier runs older than this are not used (the host's software or load changed since).
    """

    folder: Path
    material: Mapping[str, Any]
    keep: int = 10
    max_age_s: float = 7 * 24 * 3600.0

    @property
    def key(self) -> str:
        """The workload's digest."""
        return workload_key(self.material)

    @property
    def path(self) -> Path:
        """The history file: ``folder/<key>.json``."""
        return Path(self.folder) / f"{self.key}.json"

    def earlier(self, now: float | None = None) -> list[PastRun]:
        """The earlier runs still in use, oldest first; empty when there is no usable file."""
        now = time.time() if now is None else now
        runs = [r for r in self._read() if now - self.max_age_s <= r["at"] <= now + 60.0]
        kept = runs[-(self.keep - 1):] if self.keep > 1 else []
        return [PastRun(r["median_ms"], r["own_rel_half_width"]) for r in kept]

    def add(self, run: PastRun, calls: int, now: float | None = None) -> None:
        """Append this run (kept: the last ``keep`` runs); a write that fails is logged, not raised."""
        if _entry({"at": 0.0, "median_ms": run.median_ms, "own_rel_half_width": run.own_rel_half_width,
                   "calls": calls}) is None:
            return
        entry = {"at": time.time() if now is None else now, "median_ms": float(run.median_ms),
                 "own_rel_half_width": float(run.own_rel_half_width), "calls": int(calls)}
        runs = [*self._read(), entry][-self.keep:]
        body = {"format": FORMAT, "key": self.key, "material": self.material, "runs": runs}
        try:
            Path(self.folder).mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(body, default=str))
        except OSError as exc:
            log.warning("timing history not written to %s (%s): the next run of this workload gets no "
                        "between-runs interval from this one; check bench.history.dir", self.path, exc)

    def _read(self) -> list[dict[str, float]]:
        """The valid entries of the file, oldest first; [] when it is missing or not usable (warned)."""
        try:
            raw = read_regular(self.path, follow=False)
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("timing history %s not read (%s): no between-runs interval this run", self.path, exc)
            return []
        body = _parse(raw)
        if body is None or body.get("key") != self.key:
            log.warning("timing history %s set aside: not a history of this workload (not JSON, too large, or "
                        "another key); it is replaced by this run's", self.path)
            return []
        return [entry for entry in (_entry(e) for e in body.get("runs") or []) if entry is not None]


def _parse(raw: bytes) -> dict[str, Any] | None:
    if len(raw) > MAX_FILE_BYTES:
        return None
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) and isinstance(body.get("runs", []), list) else None


def _finite(value: Any) -> bool:
    """True for a finite int or float (not a bool): a number read from a file, before it is used."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _entry(value: Any) -> dict[str, float] | None:
    """One run as ``{at, median_ms, own_rel_half_width, calls}`` when its numbers are finite and sensible, else None."""
    if not isinstance(value, dict):
        return None
    at, median, own, calls = (value.get(k) for k in ("at", "median_ms", "own_rel_half_width", "calls"))
    if not all(_finite(x) for x in (at, median, own, calls)):
        return None
    if median <= 0 or own < 0 or calls < 1:
        return None
    return {"at": float(at), "median_ms": float(median), "own_rel_half_width": float(own), "calls": int(calls)}


def runs_verdict(section: Mapping[str, Any], ratio_limit: float = 2.0) -> dict[str, Any]:
    """``runs_warning`` when the between-runs interval is the one used, the runs disagree beyond chance, and it
    is wider than ``ratio_limit`` times this run's ``within`` interval: the host moved between runs more than
    this run's calls scatter (as the drift warning compares the blocks with the calls)."""
    runs = section.get("between_runs") or {}
    within = sampling_half_width(section)
    if (section.get("used") != "between_runs" or not runs.get("blocks_disagree") or not within > 0
            or runs["rel_half_width"] <= ratio_limit * within):
        return {"runs_warning": None}
    return {"runs_warning": (
        f"reruns move: the medians of {len(runs.get('earlier_ms') or [])} earlier run(s) of this workload on this "
        f"host spread so that a rerun's median lies within +-{runs['rel_half_width']:.1%} (95%), "
        f"{runs['rel_half_width'] / within:.1f}x this run's interval from its calls (+-{within:.1%}); the host "
        "switches state between runs (close other work; to compare two variants on such a host, time them "
        "interleaved: bench.ab=unpatched, docs/performance.md)")}


def sampling_half_width(section: Mapping[str, Any]) -> float:
    """The run median's own sampling error from ``bench.interval``: the ``within`` half-width (nan without)."""
    found = (section.get("within") or {}).get("rel_half_width")
    return float("nan") if found is None else float(found)
