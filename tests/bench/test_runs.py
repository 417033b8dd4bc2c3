"""The between-runs interval: a workload's earlier medians on this host, and the history file that keeps them.

The fake host here switches state *between* runs and holds it during each one (what the CI host does: steady for
0.1-0.3 s, then 3% to 15% elsewhere for the next run). Blocks of one run cannot see that; the runs can.
"""

from __future__ import annotations

import json
import math
import os
import statistics

import numpy as np
import pytest

from ascendbench.bench import summary
from ascendbench.bench.blocks import Interval, honest, t975
from ascendbench.bench.budget import BenchBudget, StopRule
from ascendbench.bench.loop import BenchLoop
from ascendbench.bench.runs import MIN_EARLIER, PastRun, RunHistory, runs_interval, workload_key

from helpers.timing import FakeClock, HostOnlyAdapter

BUDGET = BenchBudget(warmup=0, min_iters=5, max_iters=400, max_time_s=1000.0, precision=0.01)
ROUNDS = 40


def _past(medians, own=0.01):
    return [PastRun(m, own) for m in medians]


def test_runs_interval_is_t_on_the_level_spread_net_of_each_runs_own_error_for_a_rerun():
    earlier, median, own = _past([1.00, 1.03, 0.99, 1.10], 0.01), 1.01, 0.02
    logs = np.log(np.array([r.median_ms for r in earlier] + [median]) / median)
    se = np.log1p(np.array([0.01] * 4 + [own])) / 1.959963984540054
    level = np.var(logs, ddof=1) - np.mean(se ** 2)
    half = t975(4) * math.sqrt(2 * level + se[-1] ** 2)
    found = runs_interval(earlier, median, own)
    assert found.low_ms == pytest.approx(median * math.exp(-half))
    assert found.high_ms == pytest.approx(median * math.exp(half))
    assert found.rel_half_width == pytest.approx(math.expm1(half))
    assert found.level_rel_half_width == pytest.approx(math.expm1(t975(4) * math.sqrt(2 * level)))
    assert "5 run medians" in found.method and "4 earlier" in found.method
    assert runs_interval(earlier[:MIN_EARLIER - 1], median, own) is None, "too few earlier runs: no claim"
    assert runs_interval(earlier, median, float("nan")) is None and runs_interval(earlier, 0.0, own) is None


def test_runs_that_agree_within_their_own_errors_leave_this_runs_own_interval():
    """A host that holds its level: the medians differ by their sampling error only; the interval is t(m-1)
    on this run's own error (no level term), so a 1% precision stays reachable."""
    found = runs_interval(_past([1.004, 0.997, 1.002, 0.996, 1.003], 0.01), 1.0, 0.008)
    assert found.level_rel_half_width == 0.0
    assert found.rel_half_width == pytest.approx(math.expm1(t975(5) * math.log1p(0.008) / 1.959963984540054))


def test_the_interval_covers_a_rerun_on_normal_levels_as_a_prediction_interval_does():
    """Levels drawn normal (on the log scale): this run's interval holds the next run's median in ~96.5%."""
    rng = np.random.default_rng(0)
    for m in (3, 5, 10):
        levels = np.exp(rng.normal(0.0, 0.03, (4000, m + 1)))
        covered = [(f := runs_interval(_past(row[:m - 1], 0.0), row[m - 1], 0.0)).low_ms <= row[m] <= f.high_ms
                   for row in levels]
        assert 0.95 <= np.mean(covered) <= 0.98, (m, np.mean(covered))


def test_the_honest_interval_is_the_widest_of_the_three():
    def iv(width):
        return Interval(1 - width, 1 + width, width, "x")

    assert honest(iv(0.01), iv(0.02), iv(0.05))[0] == "between_runs"
    assert honest(iv(0.01), iv(0.02), iv(0.015))[0] == "between"
    assert honest(iv(0.03), iv(0.02), None)[0] == "within"
    assert honest(None, iv(0.02), iv(0.05)) is None, "no claim below 6 calls"


def _host_run(loop: BenchLoop, clock: FakeClock, level: float, rng: np.random.Generator):
    noise = iter(rng.lognormal(0.0, 0.03, 100_000))

    def call():
        clock.now += level * next(noise) / 1e3

    return loop.run(call)


def _switching_host(history: RunHistory | None, seed: int, sigma: float):
    """ROUNDS runs on a host whose level is redrawn between runs (held during each); each run's interval
    against the next run's level (a rerun meets the host in another state)."""
    rng, clock = np.random.default_rng(seed), FakeClock()
    levels = rng.lognormal(0.0, sigma, ROUNDS + 1)
    loop = BenchLoop(HostOnlyAdapter(), BUDGET, clock=clock, history=history)
    runs = [_host_run(loop, clock, float(level), rng) for level in levels[:-1]]
    covered = [r.latency.median_ci95_low_ms <= nxt <= r.latency.median_ci95_high_ms
               for r, nxt in zip(runs, levels[1:], strict=True)]
    return runs, covered


def test_on_a_host_that_switches_between_runs_only_the_history_covers_a_rerun(tmp_path):
    history = RunHistory(tmp_path, {"op": "fake"}, keep=10, max_age_s=float("inf"))
    runs, covered = _switching_host(history, seed=1, sigma=0.03)
    plain, without = _switching_host(None, seed=1, sigma=0.03)
    later = covered[MIN_EARLIER:]
    # Measured with this seed: without the history 11 of 40 covered (every run steady, +-1%); with it 36 of 38
    # (seeds 1-5: 92% to 97%, and 8% to 28% without).
    assert np.mean(without) <= 0.35, f"blocks alone cannot see a switch between runs, covered {np.mean(without):.0%}"
    assert np.mean(later) >= 0.9, f"the between-runs interval should cover a rerun, covered {np.mean(later):.0%}"
    assert all(r.interval["used"] == "between_runs" for r in runs[MIN_EARLIER:])
    assert "between_runs" not in runs[0].interval and "between_runs" not in runs[1].interval
    assert len(runs[-1].interval["between_runs"]["earlier_ms"]) == 9, "keep=10: this run and 9 earlier"
    late = runs[MIN_EARLIER + 3:]
    assert np.mean([r.stop["reason"] == "runs" for r in late]) >= 0.8  # measured: 32 of 35 (the rest max_iters)
    assert all(r.stop["precision_met"] is False for r in late if r.stop["reason"] == "runs")
    calls, calls_without = (statistics.median(r.stop["iters"] for r in rs[MIN_EARLIER + 3:]) for rs in (runs, plain))
    assert calls < calls_without / 2, "no more calls than the rerun spread needs"
    assert all(r.noise["runs_warning"] and r.noise["noisy"] for r in late if r.stop["reason"] == "runs")
    stopped = next(r for r in late if r.stop["reason"] == "runs")
    lines = summary.bench_lines({**stopped.to_dict(1, "images"), "flops": {}})
    assert "between runs, " in lines[0] and " earlier (+-" in lines[0] and "; within +-" in lines[0]
    assert any(line.startswith("warning   reruns move:") for line in lines)


def test_on_a_host_that_holds_its_level_the_interval_stays_tight(tmp_path):
    history = RunHistory(tmp_path, {"op": "fake"}, max_age_s=float("inf"))
    runs, covered = _switching_host(history, seed=2, sigma=0.0005)
    # The first run with a history has 2 earlier ones (t on 2 degrees of freedom: 4.3); from the next on
    # (seeds 1-5 measured) every run met the 1% precision.
    later = runs[MIN_EARLIER + 1:]
    assert all(r.stop["reason"] == "precision" and r.stop["precision_met"] for r in later)
    assert max(r.interval["between_runs"]["rel_half_width"] for r in later) < 0.01
    assert not any(r.noise["runs_warning"] for r in later)


def test_the_runs_stop_waits_for_this_runs_own_interval():
    """Earlier runs spread +-10%, but this run's own calls still scatter: no ``runs`` stop until they settle."""
    rule = StopRule(BUDGET, earlier=_past([1.0, 1.1, 0.9, 1.05]))
    rng = np.random.default_rng(3)
    for x in rng.lognormal(0.0, 0.5, 40):
        rule.add(float(x))
    assert rule.interval()[0] == "between_runs" and rule._judge() is None
    calm = StopRule(BUDGET, earlier=_past([1.0, 1.1, 0.9, 1.05]))
    for x in rng.lognormal(0.0, 0.002, 40):
        calm.add(float(x))
    assert calm._judge() == "runs"


def test_history_round_trip_keep_and_age(tmp_path):
    history = RunHistory(tmp_path, {"op": "a"}, keep=3, max_age_s=100.0)
    for i, median in enumerate([1.0, 2.0, 3.0, 4.0]):
        history.add(PastRun(median, 0.01 * i), 10, now=1000.0 + i)
    body = json.loads(history.path.read_text())
    assert [r["median_ms"] for r in body["runs"]] == [2.0, 3.0, 4.0], "the last `keep` runs"
    assert body["key"] == history.key == workload_key({"op": "a"}) and history.path.parent == tmp_path
    assert history.earlier(now=1010.0) == [PastRun(3.0, 0.02), PastRun(4.0, 0.03)], "keep - 1 (this run: the keep-th)"
    assert history.earlier(now=1102.5) == [PastRun(4.0, 0.03)], "older than max_age_s: not used"
    assert RunHistory(tmp_path, {"op": "b"}).earlier() == [], "another workload, another file"


@pytest.mark.parametrize("content", [
    b"not json", b"[1, 2]", b'{"runs": 5}', b"[" * 100_000,
    json.dumps({"key": "someone-else", "runs": [{"at": 1.0, "median_ms": 1.0, "calls": 5}] * 3}).encode(),
    b" " * (1 << 21),
])
def test_a_history_file_that_is_not_this_workloads_is_set_aside(tmp_path, content, caplog):
    history = RunHistory(tmp_path, {"op": "a"}, max_age_s=float("inf"))
    history.path.write_bytes(content)
    assert history.earlier() == []
    assert "set aside" in caplog.text
    history.add(PastRun(1.5, 0.01), 10)
    assert [r["median_ms"] for r in json.loads(history.path.read_text())["runs"]] == [1.5], "replaced"


def test_entries_that_are_not_finite_positive_numbers_are_dropped(tmp_path):
    history = RunHistory(tmp_path, {"op": "a"}, max_age_s=float("inf"))
    good = {"at": 10.0, "median_ms": 1.0, "own_rel_half_width": 0.01, "calls": 10}
    bad = [{**good, "median_ms": -1.0}, {**good, "own_rel_half_width": -0.1}, {**good, "own_rel_half_width": None},
           {**good, "median_ms": "1.0"}, {**good, "median_ms": True},
           {**good, "calls": 0}, {**good, "at": None}, "1.0", None, {**good, "median_ms": float("inf")},
           {**good, "median_ms": float("nan")}]
    history.path.write_text(json.dumps({"key": history.key, "runs": [good, *bad, {**good, "median_ms": 2.0}]}))
    assert [r.median_ms for r in history.earlier(now=20.0)] == [1.0, 2.0]


def test_a_history_path_that_is_a_link_or_a_fifo_is_not_read(tmp_path, caplog):
    history = RunHistory(tmp_path, {"op": "a"}, max_age_s=float("inf"))
    target = tmp_path / "elsewhere.json"
    entry = {"at": 1.0, "median_ms": 1.0, "own_rel_half_width": 0.01, "calls": 5}
    target.write_text(json.dumps({"key": history.key, "runs": [entry] * 3}))
    history.path.symlink_to(target)
    assert history.earlier() == [] and "not read" in caplog.text
    history.path.unlink()
    os.mkfifo(history.path)
    assert history.earlier() == [], "a FIFO would block the reader"


def test_a_history_that_cannot_be_written_is_logged_not_raised(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    RunHistory(blocker / "timing", {"op": "a"}).add(PastRun(1.0, 0.01), 10)
    assert "timing history not written" in caplog.text


def test_a_run_under_6_calls_claims_no_interval_and_leaves_no_median(tmp_path):
    history = RunHistory(tmp_path, {"op": "a"}, max_age_s=float("inf"))
    for i in range(3):
        history.add(PastRun(1.0 + i / 100, 0.01), 10)
    clock = FakeClock()

    def call():
        clock.now += 1e-3

    budget = BenchBudget(warmup=0, min_iters=4, max_iters=4, max_time_s=10.0)
    result = BenchLoop(HostOnlyAdapter(), budget, clock=clock, history=history).run(call)
    assert result.interval["used"] is None and "between_runs" not in result.interval
    assert len(json.loads(history.path.read_text())["runs"]) == 3, "4 calls: no median kept"


def test_a_forged_history_cannot_narrow_the_claim(tmp_path):
    """Earlier 'runs' typed in to agree exactly with this one (own error 0): the record's interval still holds
    this run's own (within and between blocks, from the same calls); entries stamped in the future are not used."""
    history = RunHistory(tmp_path, {"op": "a"}, max_age_s=float("inf"))
    forged = [{"at": 1.0, "median_ms": 1.0, "own_rel_half_width": 0.0, "calls": 10}] * 5
    future = {"at": 4e12, "median_ms": 100.0, "own_rel_half_width": 0.0, "calls": 10}  # would widen it 100x
    history.path.write_text(json.dumps({"key": history.key, "runs": [*forged, future]}))
    assert len(history.earlier()) == 5, "a run stamped in the future is not an earlier run"
    clock, rng = FakeClock(), np.random.default_rng(5)
    run = _host_run(BenchLoop(HostOnlyAdapter(), BUDGET, clock=clock, history=history), clock, 1.0, rng)
    assert "between_runs" in run.interval
    for own in (run.interval["within"], run.interval["between"]):
        assert run.latency.median_ci95_low_ms <= own["low_ms"] and own["high_ms"] <= run.latency.median_ci95_high_ms
