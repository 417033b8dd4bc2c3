"""The gate's one latency rule on records timed apart: the lower bound of NEW/OLD - 1 against the
minimum effect, its error from both runs' intervals. Runs come from the bench loop on a fake clock;
records are written by the real RecordWriter and read back by the gate (``python -m
ascendbench.report --compare``)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.history import RunHistory
from ascendbench.report.__main__ import main
from ascendbench.report.compare import compare_frames
from ascendbench.report.gather import records_frame
from ascendbench.report.significance import INTERVALS, MEDIANS, Latency, LatencyRule, decide

from helpers.timing import fake_run, latency_from_section

RULE = LatencyRule()  # the defaults of conf/report.yaml: alpha 0.05, min_effect 0.03
BUDGET = BenchBudget(
    warmup=0, min_iters=64, max_iters=64, max_time_s=1000.0
)  # 64 calls, no precision stop


def _run(rng: np.random.Generator, level: float = 1.0, history: RunHistory | None = None) -> dict:
    """A run's bench section: 64 calls of ``level`` ms with 2% noise."""
    return fake_run((level * rng.lognormal(0.0, 0.02, 65) / 1e3).tolist(), BUDGET, history).to_dict(
        1, "calls"
    )


def _record(write_record, root: Path, bench: dict, dtype: str = "float16") -> Path:
    """A record of the workload with the run's bench section; returns the record directory's
    root."""
    path = write_record(dtype, root=root, dtype=dtype, median_ms=bench["latency"]["median_ms"])
    record = json.loads(path.read_text())
    record["bench"] = {**record["bench"], **bench}
    path.write_text(json.dumps(record))
    return root


def test_a_a_pairs_on_a_steady_host_pass_and_a_3x_slower_new_fails():
    rng = np.random.default_rng(0)
    pairs = [(latency_from_section(_run(rng)), latency_from_section(_run(rng))) for _ in range(40)]
    assert all(d.method == INTERVALS for d in (decide(o, n, RULE) for o, n in pairs))
    no_effect = LatencyRule(min_effect=0.0)
    assert sum(decide(o, n, no_effect).regressed for o, n in pairs) <= 4, "alpha 5%"
    slow = [
        decide(latency_from_section(_run(rng)), latency_from_section(_run(rng, 3.0)), RULE)
        for _ in range(10)
    ]
    assert all(d.regressed for d in slow)


def test_the_line_states_the_effect_its_interval_and_the_answer():
    rng = np.random.default_rng(1)
    old, new = latency_from_section(_run(rng)), latency_from_section(_run(rng, 1.2))
    decision = decide(old, new, RULE)
    assert decision.regressed and decision.text().startswith("+")
    assert "(90% CI +" in decision.effect and "t on the intervals of OLD and NEW" in decision.effect
    assert ": SLOWER (its lower bound +" in decision.text()
    assert "> the minimum effect +3.0%" in decision.why
    same = decide(old, latency_from_section(_run(rng)), RULE)
    assert not same.regressed and "<= the minimum effect +3.0%" in same.why
    assert not decide(old, new, LatencyRule(min_effect=0.5)).regressed, (
        "within a 50% minimum effect"
    )


def test_without_calls_the_medians_alone_decide_and_say_so():
    decision = decide(Latency(100.0), Latency(110.0), RULE)
    assert decision.regressed and decision.method == MEDIANS and "untested" in decision.why
    assert decision.why.endswith("; no per-call samples in OLD and NEW")
    assert decision.effect == "+10.0%, medians only"
    assert not decide(Latency(100.0), Latency(102.9), RULE).regressed
    one = decide(latency_from_section(_run(np.random.default_rng(2))), Latency(3.0), RULE)
    assert one.regressed and "t on the intervals of OLD" in one.effect


def test_on_a_host_that_switches_between_runs_olds_runs_keep_a_a_pairs_quiet(tmp_path):
    """Levels redrawn between runs (sd 3%), steady within each: the blocks alone call many A/A pairs
    slower; with the spread of OLD's earlier runs on both sides the gate does not, and a 30%
    slowdown is still seen (NEW's own history, which would hold NEW's slowdown as the host's spread,
    is not used)."""
    rng = np.random.default_rng(3)

    def pairs(history: RunHistory | None, slowdown: float = 0.0) -> list[bool]:
        found = []
        for _ in range(30):
            old = latency_from_section(_run(rng, float(rng.lognormal(0.0, 0.03)), history))
            new = latency_from_section(_run(rng, float(rng.lognormal(0.0, 0.03)) * (1 + slowdown)))
            found.append(decide(old, new, LatencyRule(min_effect=0.0)).regressed)
        return found[3:]  # from the fourth pair on OLD has 3 earlier runs

    with_runs = pairs(RunHistory(tmp_path / "aa", {"op": "a"}, max_age_s=math.inf))
    blind = pairs(None)
    slow = pairs(RunHistory(tmp_path / "slow", {"op": "a"}, max_age_s=math.inf), 0.3)
    # Measured with seeds 3-5: 0 to 4 of 27 A/A pairs flagged with OLD's runs, 13 to 16 blind;
    # 27 of 27 slowed.
    found = (sum(with_runs), sum(blind), sum(slow))
    assert found[0] <= 4 and found[1] >= 8 and found[2] >= 24, found


def _noisy_run(rng: np.random.Generator, level: float, history: RunHistory | None) -> dict:
    """64 calls of ``level`` ms with 4% noise (a CPU host): a wider 10x-calls term than 2%."""
    durations = (level * rng.lognormal(0.0, 0.04, 65) / 1e3).tolist()
    return fake_run(durations, BUDGET, history).to_dict(1, "calls")


def test_a_forged_history_does_not_blind_the_gate_to_3x_slower(write_record, tmp_path, capsys):
    """OLD's history rewritten to runs of 0.01, 1000, 0.02 and 900 ms stamped now (calls with 4%
    noise: counted as 10x their spread, this gave OLD +-500% and `ok (not significant)`): set aside,
    so the gate fails a 3x slower NEW and says why OLD's runs were not used."""
    forged = [{"at": time.time(), "median_ms": m} for m in (0.01, 1000.0, 0.02, 900.0)]
    history = RunHistory(tmp_path / "history", {"op": "a"})
    history.path.parent.mkdir(parents=True)
    history.path.write_text(json.dumps({"key": history.key, "runs": forged}))
    rng = np.random.default_rng(4)
    sections = [_noisy_run(rng, 1.0, history), _noisy_run(rng, 3.0, None)]
    assert sections[0]["interval"]["runs"]["set_aside"] and sections[0]["noise"]["runs_warning"]
    assert sections[0]["interval"]["rel_half_width"] < 0.05, "the run's own interval"
    old, new = (_record(write_record, tmp_path / name, s)
                for name, s in zip(("old", "new"), sections, strict=True))
    assert main(["--compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "t on the intervals of OLD and NEW: SLOWER" in out
    assert "OLD's 4 earlier run medians set aside" in out
    assert "gate FAILED: 1 regression(s)" in out


EDITS = {  # a record edit that would cover OLD's median with NEW's: recomputed, never read
    "stated-width": lambda b: b["interval"].update(rel_half_width=50.0, low_ms=0.0, high_ms=1e9),
    "latency-bounds": lambda b: b["latency"].update(median_ci95_low_ms=0.0,
                                                    median_ci95_high_ms=1e9),
    "older-field": lambda b: b.update(between_runs={"level_rel_half_width": 50.0}),
}


@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("side", ["old", "new"])
def test_an_edited_interval_does_not_blind_the_gate(write_record, tmp_path, capsys, edit, side):
    """A 3x slower NEW fails whatever width OLD or NEW's record states; a stated width its own
    calls do not give is named as not believed, with the workload."""
    rng = np.random.default_rng(6)
    sections = {"old": _run(rng, 1.0), "new": _run(rng, 3.0)}
    EDITS[edit](sections[side])
    old, new = (_record(write_record, tmp_path / n, sections[n]) for n in ("old", "new"))
    assert main(["--compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert ": SLOWER (" in out and "no regression" not in out
    if edit == "stated-width":
        assert f"timing not believed | {side.upper()}" in out and "an edited record" in out
        assert "flux2_small_decoder | npu | float16 | mini" in out, "names the workload"


def test_gate_end_to_end_exit_codes_and_the_frame_without_samples(write_record, tmp_path, capsys):
    rng = np.random.default_rng(5)
    old = _record(write_record, tmp_path / "old", _run(rng))
    same = _record(write_record, tmp_path / "same", _run(rng))
    slower = _record(write_record, tmp_path / "slower", _run(rng, 1.5))
    assert main(["--compare", str(old), str(same)]) == 0
    out = capsys.readouterr().out
    assert "latency rule: NEW is slower when the one-sided 95% lower bound" in out
    assert ": ok (" in out
    assert out.rstrip().endswith("no regression")
    assert main(["--compare", str(old), str(slower)]) == 1
    assert "| median latency |" in capsys.readouterr().out
    frame = records_frame([slower])
    assert "bench.samples_ms" not in frame.columns, "the report's tables stay as they were"
    assert compare_frames(records_frame([old]), frame, RULE).failed


@pytest.fixture
def dirs(write_record, tmp_path):
    rng = np.random.default_rng(6)
    return _record(write_record, tmp_path / "old", _run(rng)), _record(
        write_record, tmp_path / "new", _run(rng)
    )


@pytest.mark.parametrize(
    "flags",
    [
        ["--alpha", "0"],
        ["--alpha", "1"],
        ["--alpha=-0.1"],
        ["--alpha", "nan"],
        ["--set", "compare.alpha=abc"],
    ],
)
def test_an_invalid_alpha_is_a_usage_error_in_one_paragraph(dirs, capsys, flags):
    assert main(["--compare", *map(str, dirs), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "\n" not in captured.err.strip(), "one paragraph, no comparison"
    assert "compare.alpha=" in captured.err
    assert "strictly between 0 and 1" in captured.err
    assert "--alpha" in captured.err


@pytest.mark.parametrize(
    "setting, words",
    [
        ("compare.min_effect=-1", "finite fraction >= 0"),
        ("compare.min_samples=1", "integer >= 2"),
        ("compare.min_samples=2.5", "integer >= 2"),
        ("compare.method=bayes", "mann_whitney, ci_overlap, median"),
    ],
)
def test_other_invalid_compare_options_exit_2(dirs, capsys, setting, words):
    assert main(["--compare", *map(str, dirs), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert f"{setting.split('=')[0]}=" in err and words in err


def test_deprecated_options_are_accepted_logged_and_ignored(dirs, capsys, caplog):
    assert (
        main(
            [
                "--compare",
                *map(str, dirs),
                "--set",
                "compare.method=mann_whitney",
                "--set",
                "compare.min_samples=10",
            ]
        )
        == 0
    )
    assert "compare.method=mann_whitney is deprecated and ignored" in caplog.text
    assert "compare.min_samples=10 is deprecated and ignored" in caplog.text
    assert "t on the intervals of OLD and NEW: ok" in capsys.readouterr().out


def test_noise_is_a_logged_alias_of_min_effect(write_record, tmp_path, capsys, caplog):
    rng = np.random.default_rng(7)
    old = _record(write_record, tmp_path / "old", _run(rng))
    new = _record(write_record, tmp_path / "new", _run(rng, 1.1))
    assert main(["--compare", str(old), str(new), "--noise", "0.5"]) == 0, "a 50% minimum effect"
    assert "compare.noise / --noise is deprecated" in caplog.text
    assert "<= the minimum effect +50.0%" in capsys.readouterr().out
