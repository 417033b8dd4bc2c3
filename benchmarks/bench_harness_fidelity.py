"""Fidelity: does the harness median agree with the two usual ways of timing the same op?

Side by side in one process, in many short rounds, the three methods in a shuffled (seeded) order
per round: adjacent measurements share the host's load of the moment, so each round's ratio cancels
slow drift, and no method always runs first (on a busy host a fixed order alone skews ratios by
20%+):
  harness  -- ascendbench.bench.run_bench (synchronize-bracketed host clock, fixed protocol: 3
              warm-ups, 15 calls)
  plain    -- a plain loop: synchronize, perf_counter, call, synchronize, perf_counter (median of
              15, after the harness's 4 untimed calls)
  autorange-- torch.utils.benchmark.Timer(...).blocked_autorange(min_run_time=0.05).median
Prints the spread of per-round ratios and their median; goal 0.97-1.03.
"""

from __future__ import annotations

import logging
import random
import statistics

from harness_common import describe, matmul_op, pick_adapter, synced_perf_counter_median_ms
from torch.utils.benchmark import Timer

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.loop import run_bench

ROUNDS, ITERS, TARGET_MS, AUTORANGE_S, GOAL = 40, 15, 2.0, 0.05, (0.97, 1.03)


def main() -> None:
    logging.getLogger("ascendbench").setLevel(logging.ERROR)  # noise warnings would drown the table
    adapter = pick_adapter()
    op, n = matmul_op(adapter, TARGET_MS)
    budget = BenchBudget(
        warmup=3, min_iters=ITERS, max_iters=ITERS, precision=None, protocol="fixed"
    )
    timer = Timer("op()", globals={"op": op})
    print(f"device: {describe(adapter)}; op: {n}x{n} matmul (~{TARGET_MS} ms)")
    methods = {
        "harness": lambda: run_bench(op, adapter, budget).latency.median_ms,
        # the plain loop first makes the harness's untimed calls (cold call + warm-ups): with
        # one call fewer to refill caches evicted by other processes, it reads 2-3 % slow on a
        # shared host
        "plain": lambda: synced_perf_counter_median_ms(
            op, adapter, ITERS, untimed=1 + budget.warmup
        ),
        "autorange": lambda: timer.blocked_autorange(min_run_time=AUTORANGE_S).median * 1e3,
    }
    rng = random.Random(0)
    vs_plain, vs_autorange, medians = [], [], []
    for _ in range(ROUNDS):
        order = list(methods)
        rng.shuffle(order)
        got = {name: methods[name]() for name in order}
        vs_plain.append(got["harness"] / got["plain"])
        vs_autorange.append(got["harness"] / got["autorange"])
        medians.append((got["harness"], got["plain"], got["autorange"]))
    print(
        "medians over rounds: harness {:.4f} ms, plain {:.4f} ms, autorange {:.4f} ms".format(
            *(statistics.median(m[i] for m in medians) for i in range(3))
        )
    )
    for name, ratios in (
        ("plain synchronized perf_counter loop", vs_plain),
        ("torch.utils.benchmark blocked_autorange", vs_autorange),
    ):
        ratio = statistics.median(ratios)
        verdict = "within goal" if GOAL[0] <= ratio <= GOAL[1] else "OUTSIDE goal"
        q1, q3 = statistics.quantiles(ratios, n=4)[0], statistics.quantiles(ratios, n=4)[2]
        print(
            f"harness median / {name}: {ratio:.3f} (median of {ROUNDS} rounds, "
            f"IQR {q1:.3f}-{q3:.3f}; goal {GOAL[0]}-{GOAL[1]}: {verdict})"
        )


if __name__ == "__main__":
    main()
