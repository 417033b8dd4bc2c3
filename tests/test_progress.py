"""Progress: a live bar on a terminal, a heartbeat line at most every 15 s elsewhere, the job's name
in each, driven by a fake clock; the timing loop's and the pipeline's progress; quiet timed
calls."""

from __future__ import annotations

import io
import logging
import re
import time
from types import SimpleNamespace

import pytest
import torch

from ascendbench import progress
from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.loop import BenchLoop
from ascendbench.errors import ConfigError
from ascendbench.progress import Progress, ProgressOptions, format_seconds, quiet_logger
from ascendbench.tasks.text_to_video import TextToVideoTask

from helpers.timing import HostOnlyAdapter

JOB = "tiny_flux2_decoder/float32/mini"
STAMP = re.compile(r"(\d+(?:\.\d+)?) s(?: of|,|$)")


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def job_name(monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    progress.job_name(JOB)
    yield
    progress.job_name(None)


def _lines(stream):
    return [line for line in stream.getvalue().splitlines() if line.strip()]


def test_off_a_terminal_at_most_one_heartbeat_per_15_s_each_with_the_job_name():
    clock, stream = FakeClock(), io.StringIO()
    bar = Progress("denoising", total=100, unit="steps",
                   options=ProgressOptions(stream=stream, clock=clock))
    assert bar.mode == "log", "a plain stream is no terminal"
    emitted_at = []
    for _ in range(100):
        clock.now += 0.7  # 70 s in all
        before = len(_lines(stream))
        bar.update(1)
        if len(_lines(stream)) > before:
            emitted_at.append(clock.now)
    bar.close()
    lines = _lines(stream)
    assert len(lines) == 4 and len(emitted_at) == 4, "15, 30, 45, 60 s of 70 s"
    assert all(b - a >= 15.0 for a, b in zip([1000.0] + emitted_at, emitted_at, strict=False))
    assert all(line.startswith(f"[{JOB}] denoising: ") for line in lines)
    assert lines[0].startswith(f"[{JOB}] denoising: 22/100 steps, 15.4 s, ETA ")


def test_a_phase_shorter_than_the_interval_writes_nothing():
    clock, stream = FakeClock(), io.StringIO()
    with Progress("warm-up", total=3, options=ProgressOptions(stream=stream, clock=clock)) as bar:
        for _ in range(3):
            clock.now += 4.0
            bar.update(1)
    assert stream.getvalue() == ""


def test_on_a_terminal_a_live_bar_with_the_job_name():
    stream = Terminal()
    bar = Progress("denoising", total=4, unit="steps",
                   options=ProgressOptions(stream=stream, refresh_s=0))
    assert bar.mode == "bar"
    for step in range(4):
        bar.update(1, timestep=999 - step)
    drawn = stream.getvalue()
    bar.close()
    assert f"[{JOB}] denoising" in drawn
    assert "4/4" in drawn
    assert "timestep 996" in drawn
    assert "\r" in drawn


def test_a_worker_process_never_draws_a_bar(monkeypatch):
    monkeypatch.setattr(progress.multiprocessing, "current_process",
                        lambda: SimpleNamespace(name="LokyProcess-1"))
    assert Progress("timing", options=ProgressOptions(stream=Terminal())).mode == "log"


def test_the_environment_forces_a_mode_and_a_bad_one_says_what_is_allowed(monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_ENV, "off")
    stream = Terminal()
    bar = Progress("timing", options=ProgressOptions(stream=stream))
    bar.update(5)
    assert bar.mode == "off" and stream.getvalue() == "" and bar.done == 0
    monkeypatch.setenv(progress.PROGRESS_ENV, "loud")
    with pytest.raises(ConfigError,
                       match=r"ASCENDBENCH_PROGRESS='loud' .* one of \['bar', 'log', 'off'\]"):
        Progress("timing")


def test_heartbeats_go_to_the_log_by_default(caplog):
    clock = FakeClock()
    with caplog.at_level("INFO", logger="ascendbench.progress"):
        bar = Progress("model load", options=ProgressOptions(mode="log", clock=clock))
        clock.now += 16.0
        bar.tick()
    assert caplog.messages == [f"[{JOB}] model load: 16.0 s"]


def test_ticking_refreshes_a_blocking_call_from_a_thread():
    stream = io.StringIO()
    options = ProgressOptions(mode="log", stream=stream, interval_s=0.01)
    with Progress("model load", options=options).ticking(period_s=0.01):
        time.sleep(0.2)
    lines = _lines(stream)
    assert len(lines) >= 2 and all(line.startswith(f"[{JOB}] model load: ") for line in lines)


def test_quiet_blocks_turn_progress_off_and_nest():
    with progress.quiet():
        with progress.quiet():
            assert progress.is_quiet()
        assert Progress("x", options=ProgressOptions(mode="log")).mode == "off"
    assert not progress.is_quiet()


def test_job_label_of_a_config():
    cfg = {"model": {"name": "tiny_flux2_decoder"}, "dtype": {"name": "float32"},
           "preset": {"name": "mini"}}
    assert progress.job_label(cfg) == JOB and progress.job_label({}) == "job"


# --- the timing loop
# --------------------------------------------------------------------------------


def test_the_timed_loop_reports_calls_budget_and_median_ci_between_calls():
    clock, stream = FakeClock(), io.StringIO()

    def call():
        clock.now += 0.0312  # 31.2 ms per call
        return {}

    budget = BenchBudget(warmup=1, min_iters=10, max_iters=100_000, max_time_s=60.0, precision=None)
    options = ProgressOptions(stream=stream, clock=clock, mode="log")
    result = BenchLoop(HostOnlyAdapter(), budget, clock=clock, progress=options).run(call)
    assert result.stop["reason"] == "min_reached"  # 10 calls: far below 15 s, no line
    assert _lines(stream) == []
    budget = BenchBudget(warmup=1, min_iters=10, max_iters=100_000, min_time_s=60.0,
                         max_time_s=60.0)
    result = BenchLoop(HostOnlyAdapter(), budget, clock=clock, progress=options).run(call)
    lines = _lines(stream)
    assert result.stop["timed_s"] >= 60.0 and len(lines) == 3, "one line at 15, 30 and 45 s"
    assert all(line.startswith(f"[{JOB}] timing: ") for line in lines)
    expected = r"timing: \d+ calls, 15\.\d s of 60\.0 s, median 31\.2 ms \+- 0 ms \(95% CI\)$"
    assert re.search(expected, lines[0])
    seconds = [float(STAMP.search(line).group(1)) for line in lines]
    assert all(b - a >= 15.0 for a, b in zip(seconds, seconds[1:], strict=False))


def test_warmup_and_timed_calls_run_quiet_the_cold_call_does_not():
    clock, seen = FakeClock(), []

    def call():
        seen.append(progress.is_quiet())
        clock.now += 0.01
        return {}

    budget = BenchBudget(warmup=2, min_iters=3, max_iters=3)
    BenchLoop(HostOnlyAdapter(), budget, clock=clock,
              progress=ProgressOptions(mode="off")).run(call)
    assert seen == [False, True, True, True, True, True]


# --- pipeline steps
# ---------------------------------------------------------------------------------


class FakePipe:
    """A diffusers-like pipeline: calls ``callback_on_step_end`` after each of
    ``num_inference_steps``."""

    def __init__(self, clock, step_s):
        self.clock, self.step_s, self.callbacks = clock, step_s, []

    def __call__(self, **kwargs):
        callback = kwargs.get("callback_on_step_end")
        self.callbacks.append(callback)
        latents = torch.zeros(1)
        for i in range(kwargs["num_inference_steps"]):
            self.clock.now += self.step_s
            if callback is not None:
                latents = callback(self, i, 1000 - 20 * i, {"latents": latents})["latents"]
        frames = torch.zeros(1, kwargs["num_frames"], 3, kwargs["height"], kwargs["width"])
        return SimpleNamespace(frames=frames)


def _t2v(steps):
    task = TextToVideoTask(prompt="a cat", spatial_compression=8, temporal_compression=8)
    inputs = task.make_inputs({"height": 32, "width": 32, "num_frames": 9, "batch_size": 1,
                               "steps": steps}, 42)
    return task, inputs


def test_denoising_steps_report_progress_and_stay_out_of_quiet_calls(monkeypatch):
    clock, stream = FakeClock(), io.StringIO()
    pipe = FakePipe(clock, step_s=4.0)
    task, inputs = _t2v(steps=10)
    monkeypatch.setitem(progress._STATE, "defaults",
                        ProgressOptions(mode="log", stream=stream, clock=clock))
    task.run(pipe, inputs)
    with progress.quiet():
        task.run(pipe, inputs)
    lines = _lines(stream)
    assert lines == [f"[{JOB}] denoising: 4/10 steps, 16.0 s, ETA 24.0 s, timestep 940",
                     f"[{JOB}] denoising: 8/10 steps, 32.0 s, ETA 8.0 s, timestep 860"]
    assert pipe.callbacks[0] is not None
    assert pipe.callbacks[1] is None, "no hook at all in a quiet (timed) call"


def test_the_real_tiny_pipeline_takes_the_step_progress_next_to_the_phase_timer(monkeypatch):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.utils import instantiate

    from ascendbench.bench.phases import PhaseTimer
    from ascendbench.tasks.inputs import place

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny_ltx_t2v"])
    GlobalHydra.instance().clear()
    pipe, task = instantiate(cfg.model.loader).load(None, "random",
                                                    42).module, instantiate(cfg.model.task)
    inputs = task.make_inputs({"height": 32, "width": 32, "num_frames": 9, "batch_size": 1,
                               "steps": 2}, 42)
    place(task, pipe, "cpu", torch.float32)
    timer = PhaseTimer()
    task.attach_phase_timer(pipe, timer)
    stream = io.StringIO()
    monkeypatch.setitem(progress._STATE, "defaults",
                        ProgressOptions(mode="log", stream=stream, interval_s=0.0))
    try:
        timer.reset()
        task.run(pipe, inputs)
    finally:
        timer.remove_hooks()
    lines = _lines(stream)
    assert [line.split(",")[0] for line in lines] == [f"[{JOB}] denoising: 1/2 steps",
                                                      f"[{JOB}] denoising: 2/2 steps"]
    assert len(timer.result()["step"]) == 2, "the phase timer still sees every step"


def test_job_label_numbers_the_jobs_of_a_multirun(monkeypatch):
    from hydra.core.hydra_config import HydraConfig

    hydra = SimpleNamespace(mode=SimpleNamespace(name="MULTIRUN"), job=SimpleNamespace(num=4))
    monkeypatch.setattr(HydraConfig, "initialized", staticmethod(lambda: True))
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: hydra))
    cfg = {"model": {"name": "tiny_flux2_decoder"}, "dtype": {"name": "float32"},
           "preset": {"name": "mini"}}
    assert progress.job_label(cfg) == f"{JOB}#5"
    hydra.mode = SimpleNamespace(name="RUN")
    assert progress.job_label(cfg) == JOB


def test_quiet_logger_lets_errors_through_and_restores_the_level_even_after_an_error(caplog):
    parent = logging.getLogger("ascendbench.patches")
    child = logging.getLogger("ascendbench.patches.registry")
    with caplog.at_level(logging.INFO, logger="ascendbench.patches"):
        with pytest.raises(RuntimeError), quiet_logger("ascendbench.patches"):
            child.info("applied a patch")
            child.error("a patch failed")
            raise RuntimeError("the block failed")
        assert parent.level == logging.INFO
    assert [r.getMessage() for r in caplog.records] == ["a patch failed"]


def test_a_reference_child_eta_counts_down_with_the_wall_clock_and_never_grows():
    """Planted schedule of the reference process: its first block is already done when the job
    first reads it (t=0), then one block every 40 s until 8/8 at 280 s; the job polls every 0.5 s
    (``follow_child_progress``). Every ETA printed is the time left, so it never grows."""
    clock, stream = FakeClock(0.0), io.StringIO()
    bar = Progress("reference (cpu float64)", total=8, unit="blocks",
                   options=ProgressOptions(mode="log", stream=stream, clock=clock))
    bar.update(1)
    printed = []  # (time, ETA text) of each line
    while clock.now < 279.0:
        clock.now += 0.5
        before = len(_lines(stream))
        bar.update(1 if clock.now % 40.0 == 0 else 0)
        bar.tick()
        if len(_lines(stream)) > before:
            printed.append((clock.now, _lines(stream)[-1].partition("ETA ")[2]))
    with_eta = [(at, eta) for at, eta in printed if eta]
    assert len(with_eta) >= 15 and with_eta[0][0] < 60.0, printed
    assert all(eta == format_seconds(280.0 - at) for at, eta in with_eta), printed
