"""Overhead: what one timed iteration of the harness costs beyond the op itself.

Per timed call the harness synchronizes twice, reads the clock, records events (where the device has
them), stores the sample and asks the stop rule. Three figures, side by side in one process:
  1. harness wall per timed call on a no-op call (pure bookkeeping, fixed count, no precision rule);
  2. the stop rule's cost per call with the precision check on (add + reason on a realistic stream;
     the median's CI is judged at most every 2 % more samples, so its O(n) rank search stays O(1)
     per call);
  3. on a ~0.1 ms matmul: harness wall per timed call minus a bare loop's wall per call, from many
     short alternating blocks (medians over blocks, so a drifting load hits both alike).
Goal: <= 20 us per timed iteration.
"""

from __future__ import annotations

import logging
import random
import statistics
import time

from harness_common import describe, matmul_op, pick_adapter

from ascendbench.bench.budget import BenchBudget, StopRule
from ascendbench.bench.loop import run_bench

BLOCKS, PER_BLOCK, NOOP_ITERS, GOAL_US = 200, 25, 5000, 20.0


def harness_block_us(op, adapter, iters: int) -> float:
    budget = BenchBudget(
        warmup=0, min_iters=iters, max_iters=iters, min_time_s=0.0, max_time_s=600.0, precision=None
    )
    result = run_bench(op, adapter, budget)
    return result.stop["timed_s"] / result.stop["iters"] * 1e6


def bare_block_us(op, adapter, iters: int) -> float:
    adapter.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        op()
    adapter.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def stop_rule_us(n: int) -> float:
    rng = random.Random(0)
    stream = [0.1 * (1 + 0.5 * rng.random()) for _ in range(n)]  # never within a precision of 1e-9
    rule = StopRule(
        BenchBudget(warmup=0, min_iters=1, max_iters=n + 1, max_time_s=1e9, precision=1e-9)
    )
    t0 = time.perf_counter()
    for i, sample in enumerate(stream):
        rule.add(sample)
        rule.reason(float(i))
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    logging.getLogger("ascendbench").setLevel(
        logging.ERROR
    )  # the noise warning is not the point here
    adapter = pick_adapter()
    op, n = matmul_op(adapter, 0.1)
    print(f"device: {describe(adapter)}; op: {n}x{n} matmul (~0.1 ms)")
    noop = lambda: None  # noqa: E731
    noop_us = statistics.median(harness_block_us(noop, adapter, NOOP_ITERS) for _ in range(5))
    rule_us = statistics.median(stop_rule_us(2000) for _ in range(5))
    bare, timed = [], []
    for _ in range(BLOCKS):
        bare.append(bare_block_us(op, adapter, PER_BLOCK))
        timed.append(harness_block_us(op, adapter, PER_BLOCK))
    bare_us, timed_us = statistics.median(bare), statistics.median(timed)
    print(
        f"op per call: bare {bare_us:.1f} us, in harness {timed_us:.1f} us "
        f"(medians of {BLOCKS} alternating blocks of {PER_BLOCK} calls)"
    )
    for label, value in (
        ("harness cost per timed call on a no-op", noop_us),
        ("stop rule with the precision check, per call (2000 samples)", rule_us),
        ("extra wall per timed call on the ~0.1 ms op", timed_us - bare_us),
    ):
        verdict = "within goal" if value <= GOAL_US else "OVER goal"
        print(f"{label}: {value:.2f} us (goal <= {GOAL_US:.0f} us: {verdict})")


if __name__ == "__main__":
    main()
