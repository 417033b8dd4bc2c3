"""Calibration: does the median's interval hold a rerun's median, and does the gate's one rule see
a slowdown without crying wolf?

On one op (a 400x400 float32 matmul, one CPU thread; the first usable of npu, cuda, cpu):
  1. coverage: ROUNDS runs of the bench's adaptive loop (bench.precision=0.01) sharing one fresh
     run history of the op, as reruns of a job do, GAP_S apart: how often run i's recorded 95%
     interval holds run i+1's median (judged on the runs with MIN_EARLIER earlier medians);
  2. the gate on pairs timed interleaved (OLD and NEW in alternating blocks of one run, AB_S seconds
     of timed calls), each side written as a record, read back by the gate's reader and judged by
     decide() with alpha 0.05 and ``--min-effect 0.01`` (the default 0.03 printed beside it): A/A
     pairs for the false alarms, pairs whose NEW call spins 5% longer for the power;
  3. stated, no goal: the rule on A/A pairs timed apart (two 1 s runs GAP_S apart, OLD with the
     op's run history), and how far the host's level moved between the two runs;
  4. the harness's overhead per timed call (a no-op call, the precision check on and never met).
The load average is printed with every figure. ``--quick`` halves the rounds and pairs.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path

import torch
from harness_common import describe, pick_adapter, synced_perf_counter_median_ms

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.history import RunHistory
from ascendbench.bench.interleave import InterleavedLoop, Side
from ascendbench.bench.loop import BenchLoop, run_bench
from ascendbench.bench.stats import MIN_EARLIER
from ascendbench.report.significance import LatencyRule, decide, latency_of

SIZE, GAP_S, AB_S, APART_S = 400, 0.5, 2.0, 1.0
ROUNDS, AA_PAIRS, POWER_PAIRS, APART_PAIRS = 30, 40, 20, 20
BUDGET = BenchBudget(warmup=1, warmup_max=20, min_iters=5, max_iters=400, max_time_s=1.0,
                     precision=0.01)
AB_BUDGET = BenchBudget(warmup=1, warmup_max=20, min_iters=5, max_iters=10**6, min_time_s=AB_S,
                        max_time_s=AB_S)
APART_BUDGET = BenchBudget(warmup=1, warmup_max=20, min_iters=5, max_iters=10**6,
                           min_time_s=APART_S, max_time_s=APART_S)
GOALS = {"coverage": 0.90, "false_alarms": 0.05, "power5": 0.80, "overhead_us": 20.0}
RULE, DEFAULT_RULE = LatencyRule(min_effect=0.01), LatencyRule()


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def _verdict(ok: bool) -> str:
    return "within goal" if ok else "MISSES goal"


def _spinner(op, extra_s: float):
    """``op`` followed by a busy wait of ``extra_s`` seconds (a planted, exactly sized slowdown)."""
    def slower():
        out = op()
        end = time.perf_counter() + extra_s
        while time.perf_counter() < end:
            pass
        return out
    return slower


def _history(folder: str) -> RunHistory:
    return RunHistory(Path(folder), {"op": f"{SIZE}x{SIZE} matmul"}, max_age_s=float("inf"))


def coverage(op, adapter, rounds: int) -> dict:
    """Reruns of the adaptive loop with the op's run history: does each interval hold the next run's
    median?"""
    with tempfile.TemporaryDirectory() as folder:
        loop = BenchLoop(adapter, BUDGET, history=_history(folder))
        runs = []
        for _ in range(rounds + 1):
            runs.append(loop.run(op))
            time.sleep(GAP_S)
    held = [r.latency.median_ci95_low_ms <= nxt.latency.median_ms <= r.latency.median_ci95_high_ms
            for r, nxt in zip(runs, runs[1:], strict=False)]
    later = held[MIN_EARLIER:]
    moved = [abs(b.latency.median_ms / a.latency.median_ms - 1)
             for a, b in zip(runs, runs[1:], strict=False)]
    used = [r.interval["used"] for r in runs[:-1]]
    return {"all": sum(held) / len(held), "later": sum(later) / len(later), "n_later": len(later),
            "half": statistics.median(r.interval["rel_half_width"] for r in runs[:-1]),
            "used": f"runs {used.count('runs')}, blocks {used.count('blocks')}",
            "capped": sum(bool(r.noise["runs_warning"]) for r in runs[:-1]),
            "calls": statistics.median(r.stop["iters"] for r in runs[:-1]),
            "moved": statistics.quantiles(moved, n=10)[-1]}


def _side(result, folder: Path, name: str):
    """The run as the gate sees it: a record file with the bench section, read back by the gate's
    reader."""
    path = folder / f"{name}.json"
    section = result.to_dict(1, "calls")
    path.write_text(json.dumps({"bench": section}))
    return latency_of({"record": str(path),
                       "bench.latency.median_ms": section["latency"]["median_ms"]})


def interleaved(op, adapter, pairs: int, slowdown: float, median_ms: float) -> dict:
    """Fractions of interleaved pairs flagged SLOWER, and the paired shifts."""
    new_op = _spinner(op, slowdown * median_ms / 1e3) if slowdown else op
    flagged, default, methods, shifts = 0, 0, set(), []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(pairs):
            run = InterleavedLoop(adapter, AB_BUDGET).run(Side("old", op), Side("new", new_op))
            old, new = (_side(r, Path(tmp),
                              n) for r, n in zip(run.results, ("old", "new"), strict=True))
            decision = decide(old, new, RULE)
            flagged += decision.regressed
            default += decide(old, new, DEFAULT_RULE).regressed
            methods.add(decision.method)
            shifts.append(statistics.median(b / a for a, b in run.pairs) - 1.0)
    return {"flagged": flagged / pairs, "default": default / pairs,
            "methods": ", ".join(sorted(methods)), "shifts": shifts}


def apart(op, adapter, pairs: int) -> dict:
    """A/A pairs timed GAP_S apart, OLD with the op's run history: fraction flagged, and the level's
    moves."""
    flagged, moved = 0, []
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as folder:
        history = _history(folder)
        for _ in range(pairs):
            old = _side(BenchLoop(adapter, APART_BUDGET, history=history).run(op), Path(tmp), "old")
            time.sleep(GAP_S)
            new = _side(run_bench(op, adapter, APART_BUDGET), Path(tmp), "new")
            flagged += decide(old, new, RULE).regressed
            moved.append(abs(new.median_ms / old.median_ms - 1.0))
    return {"flagged": flagged / pairs, "moved4": sum(m >= 0.04 for m in moved) / pairs}


def overhead_us(adapter, calls: int = 4000) -> float:
    budget = BenchBudget(warmup=0, min_iters=calls, max_iters=calls, max_time_s=600.0,
                         precision=1e-9)
    runs = [run_bench(lambda: None, adapter, budget) for _ in range(3)]
    return statistics.median(r.stop["timed_s"] / r.stop["iters"] * 1e6 for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="half the rounds and pairs")
    args = parser.parse_args()
    logging.getLogger("ascendbench").setLevel(logging.ERROR)  # warnings would drown the figures
    scale = 2 if args.quick else 1
    adapter = pick_adapter()
    a = torch.randn(SIZE, SIZE, device=adapter.torch_device)
    op = lambda: torch.mm(a, a)  # noqa: E731
    for _ in range(200):
        op()
    started = time.perf_counter()
    median_ms = synced_perf_counter_median_ms(op, adapter, 400)
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}; device: {describe(adapter)}; "
          f"op: {SIZE}x{SIZE} float32 matmul ({median_ms:.3f} ms); load average {_loadavg()}")
    cov = coverage(op, adapter, ROUNDS // scale)
    goal = _verdict(cov["later"] >= GOALS["coverage"])
    print(f"coverage of a rerun's median (the next run, {GAP_S} s later) by the recorded 95% "
          f"interval: {cov['later']:.0%} of the {cov['n_later']} runs with {MIN_EARLIER}+ "
          f"earlier runs (goal >= {GOALS['coverage']:.0%}: {goal}); all runs {cov['all']:.0%}; "
          f"interval used: {cov['used']} ({cov['capped']} capped); median half-width "
          f"+-{cov['half']:.1%} in {cov['calls']:.0f} calls; reruns moved up to "
          f"{cov['moved']:.1%} in 90% of rounds [load {_loadavg()}]")
    aa = interleaved(op, adapter, AA_PAIRS // scale, 0.0, median_ms)
    spread = statistics.quantiles([abs(x) for x in aa["shifts"]], n=10)[-1]
    goal = _verdict(aa["flagged"] <= GOALS["false_alarms"])
    print(f"gate false alarms, A/A pairs timed interleaved ({AB_S} s of blocks, {aa['methods']}): "
          f"{aa['flagged']:.0%} of {AA_PAIRS // scale} (goal <= {GOALS['false_alarms']:.0%}: "
          f"{goal}; min_effect 0.03: {aa['default']:.0%}); the median pair ratio stayed within "
          f"+-{spread:.1%} in 90% of pairs [load {_loadavg()}]")
    slow = interleaved(op, adapter, POWER_PAIRS // scale, 0.05, median_ms)
    goal = _verdict(slow["flagged"] >= GOALS["power5"])
    print(f"gate power, pairs timed interleaved, planted 5% slowdown: {slow['flagged']:.0%} of "
          f"{POWER_PAIRS // scale} (goal >= {GOALS['power5']:.0%}: {goal}; min_effect 0.03: "
          f"{slow['default']:.0%}); median pair ratio {statistics.median(slow['shifts']):+.1%} "
          f"[load {_loadavg()}]")
    far = apart(op, adapter, APART_PAIRS // scale)
    print(f"stated, no goal: A/A pairs timed apart ({APART_S} s runs, {GAP_S} s between, OLD with "
          f"the op's run history): {far['flagged']:.0%} of {APART_PAIRS // scale} flagged; the "
          f"host's median moved by >= 4% between the two runs of {far['moved4']:.0%} of them "
          f"[load {_loadavg()}]")
    cost = overhead_us(adapter)
    goal = _verdict(cost <= GOALS["overhead_us"])
    print(f"harness overhead per timed call (no-op call, precision check on): {cost:.1f} us "
          f"(goal <= {GOALS['overhead_us']:.0f} us: {goal}) [load {_loadavg()}]")
    print(f"took {time.perf_counter() - started:.0f} s; load average now {_loadavg()}")


if __name__ == "__main__":
    main()
