"""Calibration: do the bench's timing claims hold on a rerun, and does the gate see a slowdown without crying wolf?

On one op (a 400x400 float32 matmul, one CPU thread; the first usable of npu, cuda, cpu), in one process:
  1. coverage: rounds of the bench's adaptive loop (bench.precision=0.01), each followed by a 400-call plain
     loop (the "truth" of that moment); how often the recorded 95% interval holds that rerun's median, for the
     honest interval (the record's) and for the calls-only one (``within``, the interval before blocks). The
     rounds share one run history of the op (:mod:`ascendbench.bench.runs`, a fresh file), as reruns of a job
     do: from round 3 on, the record's interval may be the between-runs one;
  2. time to a result: the timed region's seconds to the stop (precision, drift or runs), and what the
     calls-only stop (the rule before blocks) would have needed on the same calls (when the new rule stopped
     first, the calls-only figure is cut at the same calls: the ratio then errs high);
  3. the gate (``compare.min_effect=0.01``): A/A pairs (the same op timed twice, GAP_S apart) for the false
     alarm rate, and pairs whose NEW call spins 2% / 5% longer for the power. OLD runs keep the op's run
     history (one fresh file for the three sets of pairs, as a job's baseline keeps its workload's), so from the
     third pair on OLD's record holds the level's spread between runs, which the gate adds to both sides;
     beside the gate, the same gate blind to OLD's runs, the block test on every block (the gate before it set
     disturbed blocks aside), the per-call Mann-Whitney test on the same pairs, and the share of A/A pairs whose
     steady level itself moved by >= 4% between the runs.
     Each side is timed with the gate's budget (GATE_BUDGET: a fixed GATE_S seconds of timed calls, no
     precision stop: the blocks must span enough of the host's
     wandering for the level term to be small), written as a record file and read back by the gate's own
     reader (:func:`ascendbench.report.compare.latency_of`) before :func:`decide` judges it;
  4. the gate on pairs timed interleaved (:mod:`ascendbench.bench.interleave`: OLD and NEW in alternating
     blocks of one run, ``2 * GATE_S`` seconds of timed calls for both, as much as a sequential pair): the same
     records, reader and :func:`decide`, which then pairs neighbouring blocks (the sign test). The issue's goals
     for the gate are judged here: two runs timed apart meet the host in two states, and on this host its level
     moves between them by more than the 5% to be seen (the host's own figure, printed in 3);
  5. the harness's overhead per timed call (a no-op call, the precision check on and never met).
The load average is printed with the figures: on a shared host they say as much about the neighbours as about
ascendbench. ``--quick`` halves the rounds and pairs (the goals are judged on the full run); ``--save F``
writes every gate pair's per-call samples to F (JSON), so that the same pairs can be judged again by another rule.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch
from harness_common import describe, pick_adapter, synced_perf_counter_median_ms

from ascendbench.bench import BenchBudget, BenchLoop, run_bench
from ascendbench.bench.blocks import level_variance, within_interval
from ascendbench.bench.interleave import Side, run_interleaved
from ascendbench.bench.runs import MIN_EARLIER, RunHistory
from ascendbench.report.compare import latency_of
from ascendbench.report.significance import Latency, LatencyRule, by_blocks, decide
from ascendbench.report.steady import steady

SIZE, TRUTH_CALLS, GAP_S, GATE_S = 400, 400, 0.5, 1.0
ROUNDS, AA_PAIRS, POWER_PAIRS = 30, 40, 20
BUDGET = BenchBudget(warmup=1, warmup_max=20, min_iters=5, max_iters=200, min_time_s=0.0, max_time_s=1.0,
                     precision=0.01)
GATE_BUDGET = BenchBudget(warmup=1, warmup_max=20, min_iters=5, max_iters=1_000_000, min_time_s=GATE_S,
                          max_time_s=GATE_S, precision=None)
AB_BUDGET = BenchBudget(warmup=1, warmup_max=20, min_iters=5, max_iters=1_000_000, min_time_s=2 * GATE_S,
                       max_time_s=2 * GATE_S, precision=None)
GOALS = {"coverage": 0.90, "false_alarms": 0.05, "power5": 0.90, "time_x": 2.0, "time_s": 0.04, "overhead_us": 20.0}
RULE = LatencyRule(min_effect=0.01)
CALLS_RULE = LatencyRule(min_effect=0.01, method="mann_whitney")


def _spinner(op, extra_s: float):
    """``op`` followed by a busy wait of ``extra_s`` seconds (a planted, exactly sized slowdown)."""
    def slower():
        out = op()
        end = time.perf_counter() + extra_s
        while time.perf_counter() < end:
            pass
        return out
    return slower


def _old_stop(samples: list[float]) -> tuple[int, float]:
    """Calls and timed seconds the calls-only precision stop would have needed on these calls (else all)."""
    for n in range(6, len(samples) + 1):
        ordered = sorted(samples[:n])
        found = within_interval(ordered, statistics.median(ordered))
        if found is not None and found.rel_half_width <= BUDGET.precision:
            return n, sum(samples[:n]) / 1e3
    return len(samples), sum(samples) / 1e3


def _op_history(adapter) -> tuple[tempfile.TemporaryDirectory, RunHistory]:
    """A fresh run history of the op (in a temporary folder the caller cleans up), as a job keeps its workload's."""
    folder = tempfile.TemporaryDirectory()
    return folder, RunHistory(Path(folder.name), {"op": f"{SIZE}x{SIZE} matmul", "device": describe(adapter)})


def coverage(op, adapter, rounds: int) -> dict:
    """Rounds of the bench's loop with the op's run history (a fresh file: round 1 has no earlier run, from
    round 3 on the between-runs interval exists), each followed by the plain rerun."""
    honest, within, new_s, old_s, new_n, old_n, used, half, reasons, moved = [], [], [], [], [], [], [], [], [], []
    folder, history = _op_history(adapter)
    loop = BenchLoop(adapter, BUDGET, history=history)
    for _ in range(rounds):
        result = loop.run(op)
        truth = synced_perf_counter_median_ms(op, adapter, TRUTH_CALLS)
        lat, inner = result.latency, result.interval["within"]
        honest.append(lat.median_ci95_low_ms <= truth <= lat.median_ci95_high_ms)
        within.append(inner["low_ms"] <= truth <= inner["high_ms"])
        n, seconds = _old_stop(result.samples_ms)
        new_s.append(result.stop["timed_s"])
        new_n.append(result.stop["iters"])
        old_s.append(seconds)
        old_n.append(n)
        used.append(result.interval["used"])
        half.append(result.stop["ci_rel_half_width"])
        reasons.append(result.stop["reason"])
        moved.append(abs(truth / lat.median_ms - 1.0))
    folder.cleanup()
    return {"honest": sum(honest) / rounds, "within": sum(within) / rounds, "new_s": statistics.median(new_s),
            "old_s": statistics.median(old_s), "new_n": statistics.median(new_n), "old_n": statistics.median(old_n),
            "used": ", ".join(f"{u} {used.count(u)}" for u in ("within", "between", "between_runs")),
            "half": statistics.median(half), "early": _early_coverage(honest),
            "reasons": ", ".join(f"{r} {reasons.count(r)}" for r in sorted(set(reasons))),
            "moved": statistics.quantiles(moved, n=10)[-1] if rounds >= 2 else moved[0]}


def _early_coverage(covered: list[bool]) -> str:
    """Coverage of the rounds without the between-runs interval (fewer than MIN_EARLIER earlier runs), and of
    the rounds after them."""
    first, later = covered[:MIN_EARLIER], covered[MIN_EARLIER:]
    return f"{sum(first)} of {len(first)}, the later ones {sum(later)} of {len(later)}"


def _gate_side(result, folder: Path, name: str) -> Latency:
    """The run as the gate sees it: a record file with the bench section, read back by the gate's reader."""
    path = folder / f"{name}.json"
    section = result.to_dict(1, "calls")
    path.write_text(json.dumps({"bench": section}))
    lat = section["latency"]
    row = {"record": str(path), **{f"bench.latency.{k}": lat[k] for k in ("median_ms", "median_ci95_low_ms",
                                                                          "median_ci95_high_ms", "count")}}
    return latency_of(row)


def _every_block(old: Latency, new: Latency) -> bool:
    """The block test on every block, the level from every call (the gate before disturbed blocks were set
    aside): is the pair flagged?"""
    levels = (level_variance(old.samples_ms), level_variance(new.samples_ms))
    return by_blocks(old.block_medians_ms, new.block_medians_ms, RULE, levels).regressed


def _steady_shift(old: Latency, new: Latency) -> float:
    """NEW/OLD - 1 of the geometric means of the steady blocks (those the gate keeps)."""
    a, b = steady(old.block_medians_ms, None).medians, steady(new.block_medians_ms, None).medians
    return math.exp(statistics.fmean(map(math.log, b)) - statistics.fmean(map(math.log, a))) - 1.0


def gate(op, adapter, pairs: int, slowdown: float, median_ms: float, history: RunHistory) -> dict:
    """Fractions of pairs flagged SLOWER by the gate, by the gate blind to OLD's runs, by the block test on every
    block and by the per-call test, and the steady level's shift in each pair (the host's own movement between
    the runs, in A/A). OLD is timed with the op's run ``history`` (as a job keeps it), NEW without."""
    new_op = _spinner(op, slowdown * median_ms / 1e3) if slowdown else op
    flags, shifts, kept = {"gate": 0, "blind": 0, "every": 0, "calls": 0}, [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(pairs):
            old = _gate_side(BenchLoop(adapter, GATE_BUDGET, history=history).run(op), Path(tmp), "old")
            time.sleep(GAP_S)
            new = _gate_side(run_bench(new_op, adapter, GATE_BUDGET), Path(tmp), "new")
            flags["gate"] += decide(old, new, RULE).regressed
            flags["blind"] += decide(dataclasses.replace(old, runs_level=0.0), new, RULE).regressed
            flags["every"] += _every_block(old, new)
            flags["calls"] += decide(old, new, CALLS_RULE).regressed
            shifts.append(_steady_shift(old, new))
            kept.append({"slowdown": slowdown, "old_ms": list(old.samples_ms), "new_ms": list(new.samples_ms)})
    return {**{k: v / pairs for k, v in flags.items()}, "shifts": shifts, "pairs": kept}


def gate_interleaved(op, adapter, pairs: int, slowdown: float, median_ms: float) -> dict:
    """Fractions of interleaved pairs (OLD and NEW in alternating blocks of one run) flagged SLOWER by the gate,
    and the paired shifts; each side written as a record and read back by the gate's reader, as in :func:`gate`."""
    new_op = _spinner(op, slowdown * median_ms / 1e3) if slowdown else op
    flagged, shifts, methods = 0, [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(pairs):
            run = run_interleaved(Side("old", op), Side("new", new_op), adapter, AB_BUDGET)
            old, new = (_gate_side(result, Path(tmp), name)
                        for result, name in zip(run.results, ("old", "new"), strict=True))
            decision = decide(old, new, RULE)
            flagged += decision.regressed
            methods.add(decision.method)
            ratios = sorted(b / a for a, b in run.pairs)
            shifts.append(ratios[len(ratios) // 2] - 1.0)
    return {"gate": flagged / pairs, "shifts": shifts, "methods": ", ".join(sorted(methods))}


def overhead_us(adapter, calls: int = 4000) -> float:
    budget = BenchBudget(warmup=0, min_iters=calls, max_iters=calls, max_time_s=600.0, precision=1e-9)
    runs = [run_bench(lambda: None, adapter, budget) for _ in range(3)]
    return statistics.median(r.stop["timed_s"] / r.stop["iters"] * 1e6 for r in runs)


def _verdict(ok: bool) -> str:
    return "within goal" if ok else "MISSES goal"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="half the rounds and pairs (about a minute)")
    parser.add_argument("--save", type=Path, help="write every gate pair's per-call samples (ms, in call order) "
                                                  "to this JSON file, to judge them again by another rule")
    args = parser.parse_args()
    logging.getLogger("ascendbench").setLevel(logging.ERROR)  # noise/drift warnings would drown the figures
    scale = 2 if args.quick else 1
    adapter = pick_adapter()
    a = torch.randn(SIZE, SIZE, device=adapter.torch_device)
    op = lambda: torch.mm(a, a)  # noqa: E731
    for _ in range(200):
        op()
    adapter.synchronize()
    started, load_before = time.perf_counter(), _loadavg()
    median_ms = synced_perf_counter_median_ms(op, adapter, TRUTH_CALLS)
    print(f"device: {describe(adapter)}; op: {SIZE}x{SIZE} float32 matmul ({median_ms:.3f} ms); load average "
          f"{load_before}; budget precision={BUDGET.precision} min_iters={BUDGET.min_iters} max_iters="
          f"{BUDGET.max_iters} max_time_s={BUDGET.max_time_s} min_time_s=0; the gate's runs: {GATE_S} s of timed "
          "calls each, no precision stop")
    rounds = ROUNDS // scale
    cov = coverage(op, adapter, rounds)
    print(f"coverage of a rerun's median ({TRUTH_CALLS}-call plain loop) by the recorded 95% interval: "
          f"{cov['honest']:.0%} over {rounds} rounds (goal >= {GOALS['coverage']:.0%}: "
          f"{_verdict(cov['honest'] >= GOALS['coverage'])}); the calls-only interval: {cov['within']:.0%}; "
          f"the first {MIN_EARLIER} rounds (no between-runs interval yet) covered {cov['early']}; interval used: "
          f"{cov['used']}; median half-width "
          f"+-{cov['half']:.1%}; the rerun's median moved from the run's by up to {cov['moved']:.1%} in 90% of rounds; "
          f"stops: {cov['reasons']} [load {_loadavg()}]")
    ratio = cov["new_s"] / cov["old_s"]
    print(f"time to a result (timed region, median): {cov['new_s']:.3f} s in {cov['new_n']:.0f} calls; the calls-only "
          f"stop (the precision stop before blocks) on the same calls: {cov['old_s']:.3f} s in {cov['old_n']:.0f} "
          f"calls: {ratio:.1f}x (goal <= {GOALS['time_x']:.0f}x the calls-only stop, measured side by side: "
          f"{_verdict(ratio <= GOALS['time_x'])}; the issue's figure for it was {GOALS['time_s']} s on a quieter "
          f"host) [load {_loadavg()}]")
    folder, history = _op_history(adapter)
    aa = gate(op, adapter, AA_PAIRS // scale, 0.0, median_ms, history)
    moved = sum(abs(x) >= 0.04 for x in aa["shifts"]) / len(aa["shifts"])
    print(f"gate false alarms, A/A pairs timed apart ({GAP_S} s between two runs), min_effect=0.01: {aa['gate']:.0%} "
          f"of {AA_PAIRS // scale} (stated: the goal is judged on interleaved pairs below; OLD timed with the op's "
          f"run history, from pair {MIN_EARLIER + 1} on its level between runs enters the test); blind to OLD's "
          f"runs: {aa['blind']:.0%}; the block test "
          f"on every block (disturbed ones kept): {aa['every']:.0%}; the per-call test: {aa['calls']:.0%}; the "
          f"host itself: the steady level moved by >= 4% between the two runs of {moved:.0%} of the pairs (a "
          f"5% regression no test of two runs tells from that) [load {_loadavg()}]")
    for slowdown in (0.02, 0.05):
        power = gate(op, adapter, POWER_PAIRS // scale, slowdown, median_ms, history)
        print(f"gate power, pairs timed apart, planted {slowdown:.0%} slowdown (a busy wait after the op): flagged "
              f"{power['gate']:.0%} of {POWER_PAIRS // scale} pairs (stated); blind to OLD's runs: "
              f"{power['blind']:.0%}; on every block: {power['every']:.0%}; the per-call test: "
              f"{power['calls']:.0%} [load {_loadavg()}]")
        aa["pairs"].extend(power["pairs"])
    folder.cleanup()
    aa_ab = gate_interleaved(op, adapter, AA_PAIRS // scale, 0.0, median_ms)
    spread = statistics.quantiles([abs(x) for x in aa_ab["shifts"]], n=10)[-1]
    print(f"gate false alarms, A/A pairs timed interleaved ({2 * GATE_S} s of alternating blocks, "
          f"min_effect=0.01, {aa_ab['methods']}): {aa_ab['gate']:.0%} of {AA_PAIRS // scale} (goal <= "
          f"{GOALS['false_alarms']:.0%}: {_verdict(aa_ab['gate'] <= GOALS['false_alarms'])}); the paired shift "
          f"stayed within +-{spread:.1%} in 90% of the pairs [load {_loadavg()}]")
    for slowdown in (0.02, 0.05):
        power = gate_interleaved(op, adapter, POWER_PAIRS // scale, slowdown, median_ms)
        goal = (f"goal >= {GOALS['power5']:.0%}: {_verdict(power['gate'] >= GOALS['power5'])}" if slowdown == 0.05
                else "stated, no goal")
        print(f"gate power, pairs timed interleaved, planted {slowdown:.0%} slowdown: flagged {power['gate']:.0%} "
              f"of {POWER_PAIRS // scale} pairs ({goal}); median paired shift "
              f"{statistics.median(power['shifts']):+.1%} [load {_loadavg()}]")
    if args.save:
        args.save.write_text(json.dumps({"op_median_ms": median_ms, "gap_s": GAP_S, "pairs": aa["pairs"]}))
        print(f"gate pairs' samples written to {args.save}")
    cost = overhead_us(adapter)
    print(f"harness overhead per timed call (no-op call, precision check on): {cost:.1f} us "
          f"(goal <= {GOALS['overhead_us']:.0f} us: {_verdict(cost <= GOALS['overhead_us'])}) [load {_loadavg()}]")
    print(f"took {time.perf_counter() - started:.0f} s; load average now {_loadavg()}")


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


if __name__ == "__main__":
    main()
