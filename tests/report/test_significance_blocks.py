"""The gate on block medians: A/A pairs of autocorrelated timings are not called slower, real slowdowns are.

Timings come from a drifting process (a log-level that wanders as an AR(1) over the calls, times a per-call
noise), the way calls on a shared host share its state of the moment; OLD and NEW are consecutive stretches of it,
each cut into blocks by the bench's own :func:`~ascendbench.bench.blocks.interval_section`. The per-call test sees
thousands of "independent" pairs and cries wolf; so does a Welch test on the block medians alone when the level
wanders on the scale of a run; the gate's test, which adds each side's level spread between its blocks, does not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from ascendbench.bench.blocks import interval_section, level_variance
from ascendbench.bench.stats import LatencyStats
from ascendbench.report.__main__ import main
from ascendbench.report.significance import (
    BLOCK_TEST,
    TEST_NAME,
    Latency,
    LatencyRule,
    by_blocks,
    decide,
    merged_pairs,
    p_text,
    welch_shift,
)

RULE = LatencyRule(min_effect=0.01)
PAIRS = 60
CALLS = 128


def _drifting(rng: np.random.Generator, n: int, phi: float = 0.97, level_sigma: float = 0.03) -> np.ndarray:
    """``n`` call times around 10 ms: a log-level AR(1) (``phi`` per call, stationary sd ``level_sigma``) plus
    1% noise per call."""
    shocks = rng.normal(0.0, level_sigma * np.sqrt(1.0 - phi ** 2), n)
    level = np.empty(n)
    level[0] = rng.normal(0.0, level_sigma)
    for i in range(1, n):
        level[i] = phi * level[i - 1] + shocks[i]
    return 10.0 * np.exp(level) * rng.lognormal(0.0, 0.01, n)


def _side(samples: np.ndarray, blocks: bool = True) -> Latency:
    stats = LatencyStats.from_ms(samples.tolist())
    section = interval_section(samples.tolist(), stats.median_ms)
    medians = tuple(section["blocks"]["medians_ms"]) if blocks else None
    return Latency(stats.median_ms, stats.median_ci95_low_ms, stats.median_ci95_high_ms, tuple(samples.tolist()),
                   stats.count, medians)


def _pair(seed: int, slowdown: float = 0.0, blocks: bool = True, calls: int = CALLS,
          phi: float = 0.97) -> tuple[Latency, Latency]:
    run = _drifting(np.random.default_rng(seed), 2 * calls, phi)
    return _side(run[:calls], blocks), _side(run[calls:] * (1.0 + slowdown), blocks)


def test_welch_matches_scipy_on_the_logs():
    rng = np.random.default_rng(0)
    old, new = rng.lognormal(0.0, 0.02, 8), rng.lognormal(0.03, 0.04, 6)
    shift, p = welch_shift(old.tolist(), new.tolist())
    expected = scipy_stats.ttest_ind(np.log(new), np.log(old), equal_var=False, alternative="greater")
    assert p == pytest.approx(expected.pvalue, rel=1e-9)
    assert shift.estimate == pytest.approx(np.exp(np.log(new).mean() - np.log(old).mean()) - 1.0)
    assert shift.low < shift.estimate < shift.high


def _blind(old: Latency, new: Latency) -> bool:
    """The block test without the level terms (batch means alone): is the pair flagged?"""
    return by_blocks(old.block_medians_ms, new.block_medians_ms, RULE).regressed


def test_a_a_pairs_of_drifting_timings_are_not_called_slower():
    pairs = [_pair(seed) for seed in range(PAIRS)]
    by_calls = sum(decide(*_pair(seed, blocks=False), RULE).regressed for seed in range(PAIRS))
    blind = sum(_blind(*pair) for pair in pairs)
    by_blocks_ = [decide(*pair, RULE) for pair in pairs]
    assert all(d.method == BLOCK_TEST for d in by_blocks_)
    flagged = sum(d.regressed for d in by_blocks_)
    # Measured over these 60 seeds: per-call test 16 (27%), block medians alone 10 (17%), the gate 1 (2%).
    assert by_calls >= 10, f"the per-call test should cry wolf on autocorrelated timings, flagged {by_calls}"
    assert blind >= 6, f"block medians without the level term should cry wolf when the level wanders, {blind}"
    assert flagged <= 3, f"A/A pairs flagged by the block test: {flagged} of {PAIRS}"


def test_a_planted_slowdown_is_still_flagged_by_the_blocks():
    """Power comes from the budget: blocks long against the level's wandering (512 calls a side; 30 of 30 here)."""
    found = [decide(*_pair(seed, slowdown=0.08, calls=512, phi=0.9), RULE) for seed in range(PAIRS // 2)]
    assert sum(d.regressed for d in found) >= 0.9 * len(found)
    assert "Welch t on block medians, blocks=8/8" in found[0].effect


def test_the_less_significant_of_two_block_lengths_is_reported():
    old, new = _pair(3, slowdown=0.02)
    levels = (level_variance(old.samples_ms), level_variance(new.samples_ms))
    short = welch_shift(old.block_medians_ms, new.block_medians_ms, extra=levels)
    longer = welch_shift(merged_pairs(old.block_medians_ms), merged_pairs(new.block_medians_ms), extra=levels)
    shift, p = max(short, longer, key=lambda found: found[1])
    assert p_text(p) in decide(old, new, RULE).effect and shift.text() in decide(old, new, RULE).effect


def test_too_few_blocks_hand_over_to_the_per_call_test_and_say_so():
    old, new = _pair(1, slowdown=0.2)
    few = Latency(new.median_ms, new.ci_low_ms, new.ci_high_ms, new.samples_ms, new.count, new.block_medians_ms[:3])
    decision = decide(old, few, RULE)
    assert decision.method == TEST_NAME and "Welch t on block medians underpowered: 8/3 blocks < 4" in decision.why


# End to end: records written by the real RecordWriter, samples and the bench's interval section planted.

def _plant(path: Path, samples: np.ndarray, blocks: bool) -> None:
    record = json.loads(path.read_text())
    stats = LatencyStats.from_ms(samples.tolist())
    record["bench"]["latency"] = stats.to_dict()
    record["bench"]["samples_ms"] = samples.tolist()
    if blocks:
        record["bench"]["interval"] = interval_section(samples.tolist(), stats.median_ms)
    path.write_text(json.dumps(record))


def _write(write_record, root: Path, samples: np.ndarray, blocks: bool = True) -> Path:
    _plant(write_record("a", root=root, median_ms=float(np.median(samples))), samples, blocks)
    return root


def test_gate_end_to_end_decides_by_blocks_and_falls_back_for_old_records(write_record, tmp_path, capsys):
    run = _drifting(np.random.default_rng(7), 2 * CALLS)
    old = _write(write_record, tmp_path / "old", run[:CALLS])
    slower = _write(write_record, tmp_path / "slower", run[CALLS:] * 1.10)
    assert main(["--compare", str(old), str(slower), "--min-effect", "0.01"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"Welch t on block medians, blocks=8/\d( \(\d/\d more set aside as disturbed\))?: SLOWER", out)
    assert "gate FAILED: 1 regression(s)" in out
    assert "latency rule: NEW is slower when the median shift exceeds 1.0%" in out and BLOCK_TEST in out
    before = _write(write_record, tmp_path / "before_blocks", run[CALLS:], blocks=False)
    main(["--compare", str(old), str(before), "--min-effect", "0.01"])
    out = capsys.readouterr().out
    assert "Mann-Whitney U, n=128/128" in out and "no per-block medians in NEW (a record from before blocks" in out


def test_gate_ignores_block_medians_that_are_not_positive_numbers(write_record, tmp_path, capsys):
    run = _drifting(np.random.default_rng(8), 2 * CALLS)
    old = _write(write_record, tmp_path / "old", run[:CALLS])
    new = _write(write_record, tmp_path / "new", run[CALLS:])
    path = new / "a" / "record.json"
    record = json.loads(path.read_text())
    record["bench"]["interval"]["blocks"]["medians_ms"][2] = "NaN"
    path.write_text(json.dumps(record))
    main(["--compare", str(old), str(new)])
    assert "no per-block medians in NEW" in capsys.readouterr().out
