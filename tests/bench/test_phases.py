"""Per-phase timing on a diffusers-style pipeline loop: hooks, step callbacks, per-call reset."""

from __future__ import annotations

import pytest
import torch
from diffusers import FlowMatchEulerDiscreteScheduler

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.loop import BenchLoop
from ascendbench.bench.phases import PhaseTimer, summarize_phases

TEXT_S, DENOISE_S, SCHED_S, DECODE_S, PREP_S = 0.010, 0.020, 0.001, 0.050, 0.003


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Costly(torch.nn.Module):
    """A real module whose forward also moves the fake clock by a fixed cost."""

    def __init__(self, clock, cost, dim=8):
        super().__init__()
        self.clock, self.cost = clock, cost
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        self.clock.now += self.cost
        return self.proj(x)


class TinyVae(torch.nn.Module):
    def __init__(self, clock):
        super().__init__()
        self.clock = clock
        self.conv = torch.nn.Conv2d(2, 3, 1)

    def decode(self, latents):
        self.clock.now += DECODE_S
        return self.conv(latents)


class TinyPipeline:
    """The shape of a diffusers text-to-image/video __call__: encode, denoise with callbacks,
    decode."""

    def __init__(self, clock, steps=4):
        torch.manual_seed(0)
        self.clock, self.steps = clock, steps
        self.text_encoder = Costly(clock, TEXT_S)
        self.transformer = Costly(clock, DENOISE_S)
        self.vae = TinyVae(clock)
        self.scheduler = FlowMatchEulerDiscreteScheduler()

    def __call__(self, prompt_embeds, callback_on_step_end=None):
        embeds = self.text_encoder(prompt_embeds)
        self.clock.now += PREP_S  # latents preparation, timesteps
        self.scheduler.set_timesteps(self.steps)
        latents = torch.zeros(1, 2, 2, 2)
        for i, t in enumerate(self.scheduler.timesteps):
            noise_pred = self.transformer(embeds)[:, :8].reshape(1, 2, 2, 2)
            latents = self.scheduler.step(noise_pred, t, latents).prev_sample
            self.clock.now += SCHED_S
            if callback_on_step_end is not None:
                callback_on_step_end(self, i, t, {"latents": latents})
        return self.vae.decode(latents)


class GapAdapter:
    """Synchronize takes a whole second of fake time: a gap between calls that must never become a
    step."""

    name = "fake"

    def __init__(self, clock):
        self.clock = clock

    def synchronize(self):
        self.clock.now += 1.0

    def new_event(self):
        return None

    def reset_peak_memory(self):
        pass

    def peak_memory_mb(self):
        return {}


def instrumented(steps=4, starts_with="denoiser"):
    clock = FakeClock()
    pipe = TinyPipeline(clock, steps)
    timer = PhaseTimer(clock=clock)
    timer.watch(pipe.text_encoder, "text_encoding")
    timer.watch(pipe.transformer, "denoiser")
    timer.wrap(pipe.vae, "decode", "vae_decode")
    inputs = torch.ones(1, 8)

    def call():
        return pipe(inputs, callback_on_step_end=timer.step_callback(starts_with=starts_with))

    return clock, pipe, timer, call


def test_phases_of_one_call():
    clock, _, timer, call = instrumented()
    timer.reset()
    call()
    phases = timer.result()
    assert phases["text_encoding"] == pytest.approx([TEXT_S * 1e3])
    assert phases["denoiser"] == pytest.approx([DENOISE_S * 1e3] * 4)
    assert phases["step"] == pytest.approx([(DENOISE_S + SCHED_S) * 1e3] * 4)
    assert phases["vae_decode"] == pytest.approx([DECODE_S * 1e3])


def test_without_a_start_phase_the_first_step_runs_from_the_start_of_the_call():
    _, _, timer, call = instrumented(starts_with=None)
    timer.reset()
    call()
    steps = timer.result()["step"]
    assert steps[0] == pytest.approx((TEXT_S + PREP_S + DENOISE_S + SCHED_S) * 1e3)
    assert steps[1:] == pytest.approx([(DENOISE_S + SCHED_S) * 1e3] * 3)


def test_bookkeeping_is_reset_every_call_and_gaps_between_calls_never_become_steps():
    clock, _, timer, call = instrumented(steps=3)
    budget = BenchBudget(warmup=2, min_iters=4, max_iters=4, stability=None)
    result = BenchLoop(GapAdapter(clock), budget, clock=clock).run(call, phase_timer=timer)
    step = result.phases["step"]
    assert step["calls"] == 4 and step["per_call"] == 3, "steps do not pile up across calls"
    # no gap between calls counted as a step
    assert step["max_ms"] == pytest.approx((DENOISE_S + SCHED_S) * 1e3)
    assert step["by_index_median_ms"] == pytest.approx([(DENOISE_S + SCHED_S) * 1e3] * 3)
    assert result.phases["vae_decode"]["cold_total_ms"] == pytest.approx(DECODE_S * 1e3)
    per_call = TEXT_S + PREP_S + 3 * (DENOISE_S + SCHED_S) + DECODE_S
    # one synchronize inside the bracket
    assert result.latency.median_ms == pytest.approx(per_call * 1e3 + 1000.0)
    share = 3 * DENOISE_S * 1e3 / result.latency.median_ms
    assert result.phases["denoiser"]["share"] == pytest.approx(share)


def test_hooks_and_wrappers_are_removable():
    _, pipe, timer, call = instrumented()
    timer.remove_hooks()
    assert "decode" not in vars(pipe.vae), "the class method is back"
    timer.reset()
    call()
    assert set(timer.result()) == {"step"}, "only the callback still reports"


def test_wrapping_an_instance_attribute_restores_it():
    class Holder:
        pass

    holder = Holder()
    holder.run = lambda: 42
    original = holder.run
    timer = PhaseTimer(clock=FakeClock())
    handle = timer.wrap(holder, "run", "run")
    assert holder.run() == 42 and timer.result()["run"] == [0.0]
    handle.remove()
    handle.remove()
    assert holder.run is original


def test_nested_and_unbalanced_phases():
    clock = FakeClock()
    timer = PhaseTimer(clock=clock)
    timer.end("never_started")
    timer.begin("block")
    clock.now += 1.0
    timer.begin("block")
    clock.now += 2.0
    timer.end("block")
    timer.end("block")
    assert timer.result() == {"block": pytest.approx([2000.0, 3000.0])}


def test_summary_of_phases_over_calls():
    runs = [{"step": [3.0, 1.0], "decode": [5.0]}, {"step": [5.0, 1.0], "decode": [7.0]},
            {"step": [4.0, 1.0]}]
    summary = summarize_phases(runs, median_latency_ms=10.0, cold={"decode": [50.0]})
    assert summary["step"]["calls"] == 3 and summary["step"]["per_call"] == 2
    assert summary["step"]["total_median_ms"] == 5.0 and summary["step"]["share"] == 0.5
    assert summary["step"]["by_index_median_ms"] == [4.0, 1.0]
    assert summary["decode"]["calls"] == 2 and summary["decode"]["total_median_ms"] == 6.0
    assert summary["decode"]["cold_total_ms"] == 50.0
    assert "by_index_median_ms" not in summary["decode"]
