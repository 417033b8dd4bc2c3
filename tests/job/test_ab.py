"""``bench.ab=unpatched``: the model timed with its patches against without them, interleaved in one
job, and the paired test's verdict in the record and the summary. Two registered patches of this
module: one that makes every forward call measurably slower (a busy wait) and counts where it ran,
one that changes nothing a call does."""

from __future__ import annotations

import doctest
import time
from dataclasses import dataclass
from typing import Any

import pytest

from ascendbench.bench.interleave import Interleaved, InterleavedLoop, Side
from ascendbench.config.rules import ab_problems
from ascendbench.job import ab, summary
from ascendbench.job.summary import ab_line
from ascendbench.patches.registry import Patch, register_patch
from ascendbench.report.__main__ import main as report_main
from ascendbench.report.significance import PAIRED, LatencyRule, decide

from helpers import compose_config, read_record
from helpers.timing import latency_from_section

# A tiny GEMM (tens of microseconds a call) on one thread: with two threads on a shared 2-core host
# a call waits for the other thread's time slice now and then and costs milliseconds.
AB_RUN = ["model=gemm", "model.task.input_shape=[64,64]", "model.loader.module.out_features=64",
          "device=cpu",
          "device.threads=1", "baseline.enabled=false", "artifacts.media=false",
          "bench.flops.enabled=false",
          "preset.iters=null", "preset.warmup=0", "preset.min_iters=5", "preset.max_iters=100000",
          "preset.min_time_s=0", "preset.max_time_s=0.3"]
SLOW = ["bench.ab=unpatched", "model.patches=[{name:ab_test_spin,ms:0.1}]"]


@dataclass
class Counts:
    """How often the slow patch was applied and how many forward calls it slowed down."""

    applies: int = 0
    calls: int = 0


COUNTS = Counts()


@register_patch("ab_test_spin")
class SpinPatch(Patch):
    """Every forward call of the model busy-waits ``ms`` milliseconds first (and is counted)."""

    def __init__(self, ms: float = 0.1) -> None:
        self.ms, self.handle = ms, None

    def apply(self, target: Any) -> dict[str, Any]:
        def spin(module: Any, args: Any) -> None:
            COUNTS.calls += 1
            end = time.perf_counter() + self.ms / 1e3
            while time.perf_counter() < end:
                pass

        COUNTS.applies += 1
        self.handle = target.register_forward_pre_hook(spin)
        return {"ms": self.ms}

    def restore(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


@register_patch("ab_test_mark")
class MarkPatch(Patch):
    """Sets an attribute on the model that nothing reads: a call costs what it cost."""

    target: Any = None

    def apply(self, target: Any) -> dict[str, Any]:
        self.target = target
        target.ab_test_mark = True
        return {}

    def restore(self) -> None:
        if self.target is not None:
            del self.target.ab_test_mark
            self.target = None


@pytest.fixture
def counted(monkeypatch):
    """The slow patch's counts during the A/B alone (the device run before it applies the patch
    too)."""
    during = Counts()
    run_ab = ab.run_ab

    def counting(job: Any, call: Any) -> dict[str, Any]:
        before = Counts(COUNTS.applies, COUNTS.calls)
        try:
            return run_ab(job, call)
        finally:
            during.applies = COUNTS.applies - before.applies
            during.calls = COUNTS.calls - before.calls

    monkeypatch.setattr(ab, "run_ab", counting)
    return during


def check_patched_side_slower(record: dict, during: Counts) -> None:
    """The A/B says SLOWER, and the busy wait ran in B's calls exactly (cold call, warm-up, timed
    blocks): the patch was applied around each of B's blocks and never around A's."""
    section = record["ab"]
    a, b, decision = section["a"], section["b"], section["decision"]
    assert (a["interleave"]["side"], b["interleave"]["side"]) == ("unpatched", "patched")
    assert decision["verdict"] == "SLOWER" and decision["regressed"], decision
    assert section["speedup_paired"] < 1 and decision["shift"] > ab.MIN_EFFECT
    # one untimed call opens a block
    lead_ins = b["interleave"]["pairs"] * b["interleave"]["untimed_lead_in"]
    warm = len(b["warmup"].get("calls_ms") or [])
    assert during.calls == 1 + warm + len(b["samples_ms"]) + lead_ins, during
    # cold call, warm-up, one block a pair
    assert during.applies == 2 + b["interleave"]["pairs"], during


def test_a_patch_that_slows_every_call_is_called_slower_by_the_paired_test(cli, counted, capsys):
    result, job = cli(*AB_RUN, *SLOW)
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(job)
    check_patched_side_slower(record, counted)
    section = record["ab"]
    assert section["against"] == "unpatched" and section["decision"]["pairs"] >= 8
    assert section["speedup_paired"] == pytest.approx(1 / (1 + section["decision"]["shift"]))
    assert section["a"]["interleave"]["id"] == section["b"]["interleave"]["id"]
    assert "patches vs none, interleaved: +" in result.output and ": SLOWER" in result.output
    assert ab_line(section) in result.stdout, "the summary's A/B line"
    during_ab = result.output.split("A/B: the model without")[1]
    during_ab = during_ab.split("patches vs none, interleaved")[0]
    assert "patch ab_test_spin applied" not in during_ab, "applied and restored quietly"
    # the regression gate reads the two sides as it reads two records of one interleaved run, and
    # agrees
    old, new = latency_from_section(section["a"]), latency_from_section(section["b"])
    gate = decide(old, new, LatencyRule())
    assert gate.regressed and gate.method == PAIRED
    assert gate.effect == section["decision"]["effect"], "the same shift and interval"
    # and so does the gate's command line on the two side files the job wrote
    unpatched, patched = (str(job / section["records"][key]) for key in ("a", "b"))
    capsys.readouterr()
    assert report_main(["--compare", unpatched, patched]) == 1
    pairs = section["decision"]["pairs"]
    assert f"sign test on {pairs} interleaved block pairs: SLOWER" in capsys.readouterr().out
    assert report_main(["--compare", patched,
                        unpatched]) == 0, "the other way round it is faster: no regression"


def test_swapped_sides_fail_the_check(cli, counted, monkeypatch):
    """Planted fault: the patched call timed as side A. The verdict turns round and the check says
    so."""

    class Swapped(InterleavedLoop):
        def run(self, a: Side, b: Side) -> Interleaved:
            return super().run(b, a)

    monkeypatch.setattr(ab, "InterleavedLoop", Swapped)
    result, job = cli(*AB_RUN, *SLOW)
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(job)
    assert record["ab"]["decision"]["verdict"] == "FASTER"
    with pytest.raises(AssertionError):
        check_patched_side_slower(record, counted)


def test_a_patch_context_not_entered_fails_the_check(cli, counted, monkeypatch):
    """Planted fault: side B's blocks run without the patch applied: no difference, and no busy wait
    ran."""

    class Unpatched(InterleavedLoop):
        def run(self, a: Side, b: Side) -> Interleaved:
            return super().run(a, Side(b.name, b.call))

    monkeypatch.setattr(ab, "InterleavedLoop", Unpatched)
    result, job = cli(*AB_RUN, *SLOW)
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(job)
    assert record["ab"]["decision"]["verdict"] != "SLOWER" and counted.calls == 0
    with pytest.raises(AssertionError):
        check_patched_side_slower(record, counted)


def test_a_patch_that_changes_no_call_is_not_called_slower(cli):
    result, job = cli(*AB_RUN, "bench.ab=unpatched", "model.patches=[ab_test_mark]")
    assert result.returncode == 0, result.output[-3000:]
    decision = read_record(job)["ab"]["decision"]
    assert decision["verdict"] != "SLOWER" and not decision["regressed"], decision
    assert abs(decision["shift"]) < 0.2, decision


def test_a_compiled_model_gets_a_warning_that_blocks_may_recompile(cli):
    result, job = cli(*AB_RUN, "bench.ab=unpatched", "model.patches=[ab_test_mark]",
                      "device.compile=aot_eager", "preset.max_time_s=0.1")
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(job)
    assert record["ab"]["decision"]["pairs"] >= 1
    warnings = record["warnings"]
    assert any("device.compile=aot_eager" in w and "recompile" in w for w in warnings), warnings


@pytest.mark.parametrize(("overrides", "words"), [
    (["bench.ab=patched", "model.patches=[ab_test_mark]"],
     "bench.ab='patched' is not allowed: it must be null or unpatched"),
    (["bench.ab=unpatched"], "model.patches is empty: there is nothing to compare"),
    (["bench.ab=unpatched", "model.patches=[{name:ab_test_mark,devices:[npu]}]"],
     "no patch applies on cpu in float32 (ab_test_mark: not applied on cpu"),
])
def test_a_bad_ab_setting_is_one_paragraph_and_a_failed_record(cli, overrides, words):
    result, job = cli(*AB_RUN, *overrides)
    assert result.returncode == 1
    record = read_record(job)
    error = record["error"]
    assert record["status"] == "failed"
    assert error["type"] == "ConfigError"
    assert error["reason"] == "config"
    assert words in error["message"] and "bench.ab=null" in error["message"], error["message"]
    assert "\n" not in error["message"] and "Traceback" not in result.stdout
    assert "ab" not in record


def test_the_dry_run_finds_a_patch_that_would_not_apply(cli):
    plan = [*AB_RUN, "dry_run=true", "bench.ab=unpatched"]
    result, job = cli(*plan, "model.patches=[{name:ab_test_mark,devices:[npu]}]")
    assert result.returncode == 1
    problems = read_record(job)["plan"]["problems"]
    assert any("no patch applies on cpu in float32" in p for p in problems), problems
    done, _ = cli(*plan, "model.patches=[ab_test_mark]", job_dir=job.parent / "ok")
    assert done.returncode == 0, done.output[-2000:]


@pytest.mark.parametrize(("overrides", "words"), [
    (["device.world_size=2"], "runs on one device only, not with device.world_size > 1"),
    (["bench.enabled=false"], "needs the timing loop, but bench.enabled=false"),
    (["bench.ab=5"], "bench.ab='5' is not allowed"),
])
def test_the_config_check_names_what_cannot_run_an_ab(overrides, words):
    cfg = compose_config(["model=gemm", "bench.ab=unpatched", "model.patches=[ab_test_mark]",
                          *overrides])
    problems = ab_problems(cfg)
    assert len(problems) == 1 and words in problems[0] and "bench.ab=null" in problems[0], problems
    assert ab_problems(compose_config(["model=gemm",
                                       "model.patches=[ab_test_mark]"])) == [], "null: no A/B"


def _run(pairs: list[tuple[float, float]]) -> Interleaved:
    return Interleaved(results=(None, None), pairs=pairs, block_calls=4, seconds=1.0,
                       reason="precision",  # type: ignore[arg-type]
                       id="x")


def test_the_verdict_reads_both_ways_and_needs_enough_pairs():
    # the host's level moving between pairs
    level = [1.0, 1.3, 0.9, 1.1, 1.25, 0.95, 1.05, 1.2, 1.0, 1.15]
    faster = ab.judge(_run([(x, 0.9 * x) for x in level]))
    assert faster["verdict"] == "FASTER" and not faster["regressed"]
    assert round(faster["shift"], 6) == -0.1
    slower = ab.judge(_run([(x, 1.1 * x) for x in level]))
    assert slower["verdict"] == "SLOWER"
    assert slower["regressed"]
    assert slower["bounds"][0] > ab.MIN_EFFECT
    within = ab.judge(_run([(x, 1.02 * x) for x in level]))
    assert within["verdict"] == "no significant difference", "a 2% shift, inside the minimum effect"
    few = ab.judge(_run([(x, 2 * x) for x in level[:5]]))
    assert few["verdict"] == "underpowered" and "5 pairs < 6" in few["text"]


def test_the_verdict_uses_the_gates_default_rule():
    rule = LatencyRule()
    assert (ab.ALPHA, ab.MIN_EFFECT) == (rule.alpha, rule.min_effect)


def test_the_summary_examples_hold():
    assert doctest.testmod(summary).failed == 0


def test_the_summary_line_ignores_a_damaged_section():
    assert ab_line(None) is None and ab_line({"decision": {"text": 3}}) is None
    assert ab_line({"decision": {"text": "x: SLOWER"},
                    "speedup_paired": float("nan")}).endswith("x: SLOWER")
