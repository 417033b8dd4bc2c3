"""The gate's latency decision: a significance test on the per-call samples plus a minimum effect,
falling back to CI overlap and then to the medians alone, each saying which method decided.

Samples are seeded lognormal draws (no timing). Statistics are checked against independent brute-force references.
"""

from __future__ import annotations

import doctest
import itertools
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from ascendbench.bench.stats import LatencyStats
from ascendbench.report import significance
from ascendbench.report.__main__ import main
from ascendbench.report.compare import compare_frames
from ascendbench.report.gather import records_frame
from ascendbench.report.significance import (
    Latency,
    LatencyRule,
    decide,
    hodges_lehmann_shift,
    mann_whitney_p,
)

RULE = LatencyRule()  # the defaults of conf/report.yaml: alpha 0.05, min_effect 0.03, min_samples 5
SEEDS = range(20)


def _draw(seed: int, shift: float, n: int = 20, sigma: float = 0.04) -> tuple[tuple, tuple]:
    """OLD and NEW per-call latencies around 100 ms; NEW's scaled by ``1 + shift``."""
    rng = np.random.default_rng(seed)
    old = 100.0 * rng.lognormal(0.0, sigma, n)
    new = 100.0 * (1.0 + shift) * rng.lognormal(0.0, sigma, n)
    return tuple(old.tolist()), tuple(new.tolist())


def _side(samples) -> Latency:
    stats = LatencyStats.from_ms(samples)
    return Latency(stats.median_ms, stats.median_ci95_low_ms, stats.median_ci95_high_ms, tuple(samples), stats.count)


def _judge(old, new, rule: LatencyRule = RULE):
    return decide(_side(old), _side(new), rule)


def test_docstring_examples_hold():
    assert doctest.testmod(significance).failed == 0


def test_mann_whitney_matches_an_exact_permutation_count():
    old, new = [10.0, 12.0, 11.5, 13.0], [12.5, 14.0, 13.5, 11.0]
    pooled = old + new
    u_new = sum(b > a for a in old for b in new)
    splits = list(itertools.combinations(range(8), 4))
    as_large = sum(sum(pooled[j] > pooled[i] for i in set(range(8)) - set(c) for j in c) >= u_new for c in splits)
    assert mann_whitney_p(old, new) == pytest.approx(as_large / len(splits))


def test_hodges_lehmann_is_the_median_pairwise_ratio():
    old, new = _draw(3, 0.10, n=9)
    ratios = sorted(b / a for a in old for b in new)
    shift = hodges_lehmann_shift(old, new)
    assert shift.estimate == pytest.approx(statistics.median(ratios) - 1.0)
    k = math.floor(81 / 2 - 1.959963984540054 * math.sqrt(81 * 19 / 12))  # Mann-Whitney ranks, normal approximation
    assert (shift.low, shift.high) == pytest.approx((ratios[k - 1] - 1.0, ratios[-k] - 1.0))
    assert shift.low < shift.estimate < shift.high


@pytest.mark.parametrize("seed", SEEDS)
def test_a_planted_10_percent_slowdown_is_flagged(seed):
    decision = _judge(*_draw(seed, 0.10))
    assert decision.regressed and decision.method == "Mann-Whitney U"


def test_runs_from_one_distribution_are_not_flagged():
    flagged = [seed for seed in SEEDS if _judge(*_draw(seed, 0.0)).regressed]
    # Binomial(20, alpha=0.05): more than 3 flags has probability 1.6%. Measured: 0 of 20 (3 of 200 seeds).
    assert len(flagged) <= 3, f"false positives at seeds {flagged}"


def test_the_test_alone_rejects_at_the_rate_alpha_allows():
    """Without the minimum effect, same-distribution pairs reach p < alpha about alpha of the time, no more."""
    rejections = sum(mann_whitney_p(*_draw(seed, 0.0)) < RULE.alpha for seed in range(200))
    # Binomial(200, 0.05): mean 10; > 20 has probability 0.2%. Measured: 12 of 200 (ranks: the same at any sigma).
    assert rejections <= 20


def test_a_significant_but_tiny_shift_is_not_flagged():
    old, new = _draw(0, 0.01, sigma=0.005)
    assert mann_whitney_p(old, new) < 1e-4, "the 1% shift is significant"
    decision = _judge(old, new)
    assert not decision.regressed and "within the minimum effect 3.0%" in decision.why
    assert _judge(old, new, LatencyRule(min_effect=0.005)).regressed, "a smaller minimum effect flags it"


def test_the_effect_line_gives_the_shift_with_its_ci_p_test_and_counts():
    decision = _judge(*_draw(0, 0.10, sigma=0.05))
    no_blocks = "no per-block medians in OLD and NEW (a record from before blocks; the per-call test assumes " \
                "independent calls)"
    assert decision.text() == ("+11.0% (95% CI +8.4% .. +14.1%), p=1e-7, Mann-Whitney U, n=20/20: SLOWER "
                               f"(p < alpha 0.05 and shift > 3.0%; {no_blocks})")
    same = _judge(*_draw(0, 0.0, sigma=0.05))
    assert same.text() == ("+0.9% (95% CI -1.5% .. +3.7%), p=0.24, Mann-Whitney U, n=20/20: ok "
                           f"(not significant: p >= alpha 0.05; {no_blocks})")


def _without_samples(lacking: str, old_ci: tuple, new_ci: tuple) -> tuple[Latency, Latency]:
    """Medians 100 -> 110 ms with the given CIs; the ``lacking`` side has no samples, the other 20."""
    old_samples, new_samples = _draw(1, 0.10)
    return (Latency(100.0, *old_ci, None if lacking == "old" else old_samples, 20),
            Latency(110.0, *new_ci, None if lacking == "new" else new_samples, 20))


@pytest.mark.parametrize("lacking", ["old", "new"])
def test_without_samples_on_either_side_ci_overlap_decides(lacking):
    """Either side without samples: the recorded CIs decide, both ways (apart: flagged; overlapping: not)."""
    decision = decide(*_without_samples(lacking, (98.0, 102.0), (108.0, 112.0)), RULE)
    assert decision.regressed and decision.method == "CI overlap"
    assert f"no per-call samples in {lacking.upper()}" in decision.why and "CI overlap, n=20/20" in decision.effect
    decision = decide(*_without_samples(lacking, (95.0, 105.0), (104.0, 116.0)), RULE)
    assert not decision.regressed and decision.method == "CI overlap" and "CIs overlap" in decision.why


def test_ci_overlap_still_needs_the_minimum_effect():
    old = Latency(100.0, 99.5, 100.5)
    new = Latency(102.0, 101.5, 102.5)
    decision = decide(old, new, RULE)
    assert not decision.regressed and "within the minimum effect" in decision.why


def test_without_samples_or_cis_the_medians_alone_decide_and_say_so():
    decision = decide(Latency(100.0), Latency(110.0), RULE)
    assert decision.regressed and decision.method == "medians only" and "untested" in decision.why
    assert "no 95% CI of the median in OLD and NEW" in decision.why
    assert not decide(Latency(100.0), Latency(102.9), RULE).regressed


def test_too_few_samples_are_underpowered_never_significant():
    old, new = _draw(2, 0.50, n=4)  # a 50% slowdown, 4 calls a side: the samples cannot decide
    decision = _judge(old, new)
    assert decision.method != "Mann-Whitney U" and "p=" not in decision.effect
    assert "Mann-Whitney U underpowered: n=4/4 < compare.min_samples=5" in decision.why
    assert decision.method == "medians only", "LatencyStats records no CI under 6 samples: the medians decide"
    with_ci = decide(Latency(100.0, 98.0, 102.0, old), Latency(150.0, 149.0, 151.0, new), RULE)
    assert with_ci.method == "CI overlap" and with_ci.regressed and "underpowered" in with_ci.why


def test_the_method_option_starts_the_chain_lower():
    old, new = _draw(0, 0.10)
    assert _judge(old, new, LatencyRule(method="ci_overlap")).method == "CI overlap"
    assert _judge(old, new, LatencyRule(method="median")).method == "medians only"


# End to end: records written by the real RecordWriter, samples planted in their bench section.

def _plant(path: Path, samples) -> None:
    """Give a record per-call samples and the latency stats the bench computes from them."""
    record = json.loads(path.read_text())
    record["bench"]["latency"] = LatencyStats.from_ms(samples).to_dict()
    record["bench"]["samples_ms"] = list(samples)
    path.write_text(json.dumps(record))


def _records(write_record, root: Path, draws: dict[str, tuple]) -> Path:
    for dtype, samples in draws.items():
        _plant(write_record(dtype, root=root, dtype=dtype, median_ms=float(np.median(samples))), samples)
    return root


@pytest.fixture
def old_new(write_record, tmp_path):
    """``old_new(shift16)``: OLD and NEW dirs with float16/float32 workloads; NEW's float16 slowed by ``shift16``."""
    def _make(shift16: float) -> tuple[Path, Path]:
        (o16, n16), (o32, n32) = _draw(5, shift16), _draw(6, 0.0)
        old = _records(write_record, tmp_path / "old", {"float16": o16, "float32": o32})
        return old, _records(write_record, tmp_path / f"new{shift16}", {"float16": n16, "float32": n32})
    return _make


def test_gate_end_to_end_flags_a_planted_slowdown_exit_1(old_new, capsys):
    old, new = old_new(0.10)
    assert main(["--compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("- flux2_small_decoder npu float16"))
    assert "Mann-Whitney U, n=20/20: SLOWER (p < alpha 0.05 and shift > 3.0%; no per-block medians in OLD and NEW" \
        in line and "95% CI" in line, "records without block medians: the per-call test decides, and says why"
    assert "| median latency |" in out and "gate FAILED: 1 regression(s)" in out
    assert "float32 mini 512x512 b1: " in out and out.count("SLOWER") == 1


def test_gate_end_to_end_passes_runs_of_one_distribution_exit_0(old_new, capsys):
    old, new = old_new(0.0)
    assert main(["--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert out.count("Mann-Whitney U, n=20/20: ok") == 2 and out.rstrip().endswith("no regression")


def test_samples_reach_the_gate_but_not_the_report_frame(old_new):
    old, new = old_new(0.10)
    frame = records_frame([new])
    assert "bench.samples_ms" not in frame.columns, "the report's tables and records.csv stay as they were"
    result = compare_frames(records_frame([old]), frame, RULE)
    assert result.failed and all("Mann-Whitney U" in line for line in result.latency)


@pytest.mark.parametrize("flags", [["--alpha", "0"], ["--alpha", "1"], ["--alpha=-0.1"], ["--alpha", "nan"],
                                   ["--set", "compare.alpha=abc"]])
def test_an_invalid_alpha_is_a_usage_error_in_one_paragraph(old_new, capsys, flags):
    old, new = old_new(0.0)
    assert main(["--compare", str(old), str(new), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "\n" not in captured.err.strip(), "one paragraph, no comparison"
    assert "compare.alpha=" in captured.err and "strictly between 0 and 1" in captured.err and "--alpha" in captured.err


@pytest.mark.parametrize("setting, words", [("compare.min_effect=-1", "finite fraction >= 0"),
                                            ("compare.min_samples=1", "integer >= 2"),
                                            ("compare.min_samples=2.5", "integer >= 2"),
                                            ("compare.method=bayes", "mann_whitney, ci_overlap, median")])
def test_other_invalid_compare_options_exit_2(old_new, capsys, setting, words):
    old, new = old_new(0.0)
    assert main(["--compare", str(old), str(new), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert f"{setting.split('=')[0]}=" in err and words in err


def test_noise_is_a_logged_alias_of_min_effect(old_new, capsys, caplog):
    old, new = old_new(0.10)
    assert main(["--compare", str(old), str(new), "--noise", "0.5"]) == 0, "a 50% minimum effect"
    assert "compare.noise / --noise is deprecated" in caplog.text
    assert "within the minimum effect 50.0%" in capsys.readouterr().out
