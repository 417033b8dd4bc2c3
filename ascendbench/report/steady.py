"""The blocks of a run that hold its steady level: those a burst on the host disturbed are set aside.

On a shared host another tenant's work takes the core now and then for a tenth of a second to a second: the
calls of those stretches run 5% to 60% slower (measured on this project's 2-core host: a 400x400 matmul's
block medians of +20%, +27%, +58% among blocks within 1% of each other; sometimes faster, when the tenant
leaves a state the run started in). Such a block is not the workload's level, and in the gate's Welch test
on block medians one of them widens a side's variance (and its level term) enough that a planted 5%
slowdown goes unseen. Before the test, each side's block medians are therefore compared with their own
median: a block further than ``DISTURBED_SPREADS`` robust spreads away (1.4826 x the median absolute
deviation of the logs, at least ``SPREAD_FLOOR``) is set aside, in either direction, as long as
``MIN_KEPT`` blocks stay and at most ``MAX_SHARE`` of them go (more blocks away from the centre is a level
that moved, not a burst: the host switched state during the run, and may again before the next run); the
level term is recomputed from the calls of the blocks kept. A side whose
blocks are all shifted together (a burst as long as the run) is not a disturbance this can see: its blocks
agree, and only another run tells it from a regression.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from ascendbench.bench.blocks import block_sizes, level_variance

# How far from the side's own centre a block median may lie, in robust spreads, before it is set aside.
DISTURBED_SPREADS = 3.0
# The smallest robust spread used (relative): blocks that agree within a few tenths of a percent would
# otherwise make a 1% block a "disturbance".
SPREAD_FLOOR = 0.01
# Fewest blocks kept on a side (the block test's own minimum); with fewer, nothing is set aside.
MIN_KEPT = 4
# The largest share of a side's blocks set aside: a burst is short; when more blocks than this lie away from
# the centre, the run's level moved (the host switched state), and every block stays, with its level term.
MAX_SHARE = 0.375


@dataclass(frozen=True)
class Steady:
    """One side for the block test: the block medians kept, the level's spread between them, and how many
    of the recorded blocks were set aside."""

    medians: tuple[float, ...]
    level: float
    set_aside: int


def disturbed(medians: Sequence[float]) -> list[bool]:
    """For each block median (> 0): is it further than ``DISTURBED_SPREADS`` robust spreads from the median
    of them all (on the logs)? All False when fewer than ``MIN_KEPT`` would stay or more than ``MAX_SHARE``
    of them would go.

    >>> disturbed([1.0, 1.001, 0.999, 1.0, 1.002, 1.25, 0.998, 1.0])
    [False, False, False, False, False, True, False, False]
    """
    logs = [math.log(m) for m in medians]
    centre = statistics.median(logs)
    spread = max(1.4826 * statistics.median(abs(v - centre) for v in logs), SPREAD_FLOOR)
    flags = [abs(v - centre) > DISTURBED_SPREADS * spread for v in logs]
    if sum(flags) > len(flags) * MAX_SHARE or len(flags) - sum(flags) < MIN_KEPT:
        return [False] * len(flags)
    return flags


def steady(medians: Sequence[float], samples: Sequence[float] | None) -> Steady:
    """The blocks kept of one side, and the level term from their calls (``samples``, in call order; the
    blocks are cut as the bench cut them, :func:`~ascendbench.bench.blocks.block_sizes`). Without samples,
    or samples that do not cut into these blocks, the level term is 0 (as for a record without samples)."""
    flags = disturbed(medians) if medians and min(medians) > 0 else [False] * len(medians)
    kept = tuple(m for m, bad in zip(medians, flags, strict=True) if not bad)
    if not samples or len(samples) < len(medians):
        return Steady(kept, 0.0, sum(flags))
    calls, start = [], 0
    for size, bad in zip(block_sizes(len(samples), len(medians)), flags, strict=True):
        if not bad:
            calls.extend(samples[start:start + size])
        start += size
    return Steady(kept, level_variance(calls, len(kept)), sum(flags))
