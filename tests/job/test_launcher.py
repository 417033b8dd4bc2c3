"""ascendbench's launcher: Hydra's basic sweep (job order, numbering, batches) runs each job with
the config the sweeper composed to check the batch, composed once; a bad swept value is still
refused before any job runs."""

from __future__ import annotations

import gc
import pickle
import threading
import weakref
from types import SimpleNamespace

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl  # the tests count compositions
from omegaconf import OmegaConf

from ascendbench.job.launcher import ComposedConfigs

from helpers import TINY_RUN, run_app

TINY = ["model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process",
        "compare.visual.enabled=false", "bench.flops.enabled=false",
        "hydra.callbacks.summary.collect_env_timeout_s=0"]


@pytest.fixture
def compositions(monkeypatch) -> list[list[str]]:
    """The overrides of every job config Hydra composes in this test."""
    seen: list[list[str]] = []
    compose = ConfigLoaderImpl.load_sweep_config

    def counted(self, master_config, sweep_overrides):
        seen.append(list(sweep_overrides))
        return compose(self, master_config, sweep_overrides)

    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", counted)
    return seen


def _swept(overrides) -> list[str]:
    return sorted(o for o in overrides if o.startswith(("dtype=", "preset.iters=")))


def test_each_job_is_composed_once_in_order_across_batches(tmp_path, compositions):
    result = run_app(["-m", *TINY, "dtype=glob(float3*)", "preset.iters=2,3",
                      "hydra.sweeper.max_batch_size=1"], tmp_path)
    assert result.returncode == 0, result.output
    jobs = [["dtype=float32", "preset.iters=2"], ["dtype=float32", "preset.iters=3"]]
    assert [_swept(c) for c in compositions] == jobs  # Hydra's basic launcher: each twice
    ran = [OmegaConf.load(p).hydra for p in result.job_dir.glob("*/.hydra/hydra.yaml")]
    assert sorted((h.job.num, _swept(h.overrides.task)) for h in ran) == list(enumerate(jobs))
    assert "Launching 1 jobs locally" in result.output


@pytest.mark.parametrize("bad", ["preset.iters=2,abc", "model=tiny_flux2_decoder,no_such_model"])
def test_a_bad_swept_value_is_refused_before_any_job_runs(tmp_path, compositions, bad):
    result = run_app(["-m", *TINY, bad], tmp_path)
    assert result.returncode == 1
    assert bad.split("=")[0] in result.output and bad.rsplit(",")[-1] in result.output
    assert not list(result.job_dir.rglob("record.json")), "a job ran before the refusal"
    assert len(compositions) == 2  # the first job composed, the second refused


class Loader:
    """Composes a new config each time (``calls`` counts them)."""

    def __init__(self, value: object = "plain") -> None:
        self.value, self.calls = value, 0

    def load_sweep_config(self, master_config, sweep_overrides):
        self.calls += 1
        return OmegaConf.create({"new": sweep_overrides, "value": self.value},
                                flags={"allow_objects": True})


def test_a_config_is_given_out_once():
    loader = Loader()
    configs = ComposedConfigs(loader)
    composed = configs.load_sweep_config(None, ["a=1"])
    kept = configs.take(None, ["a=1"])
    assert kept == composed and kept is not composed and loader.calls == 1, "kept as bytes"
    assert configs.take(None, ["a=1"]) == composed and loader.calls == 2, "then composed anew"


def test_a_config_that_cannot_be_kept_is_composed_again():
    loader = Loader(threading.Lock())  # a value of an extension's config that pickle refuses
    configs = ComposedConfigs(loader)
    configs.load_sweep_config(None, ["a=1"])
    assert configs.take(None, ["a=1"]).new == ["a=1"] and loader.calls == 2


@pytest.mark.parametrize("planted", [False, True], ids=["as-bytes", "planted-kept-alive"])
def test_no_job_config_is_alive_when_the_launcher_freezes(tmp_path, monkeypatch, planted):
    """Frozen objects are never collected, and a config is cyclic (its nodes point at their
    parents): a job config alive at the launcher's freeze (the job's own, or one composed for a
    later job) would stay in memory after its job, a leak that grows with the sweep. With the
    waiting configs planted back as live objects, the check sees them."""
    from ascendbench.job import launcher

    configs, alive_at_freeze = [], []
    compose, take = ConfigLoaderImpl.load_sweep_config, launcher.ComposedConfigs.take

    def tracked(function):
        def call(self, master_config, overrides):
            config = function(self, master_config, overrides)
            configs.append(weakref.ref(config))
            return config
        return call

    def freeze() -> None:
        alive_at_freeze.append(len({id(c) for ref in configs if (c := ref()) is not None}))
        gc.freeze()

    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", tracked(compose))
    monkeypatch.setattr(launcher.ComposedConfigs, "take", tracked(take))
    monkeypatch.setattr(launcher, "gc", SimpleNamespace(collect=gc.collect, freeze=freeze))
    if planted:
        monkeypatch.setattr(launcher, "pickle", SimpleNamespace(
            dumps=lambda config: config, loads=lambda config: config,
            PicklingError=pickle.PicklingError))
    result = run_app(["-m", *TINY, "preset.iters=2,3,4"], tmp_path)
    assert result.returncode == 0, result.output
    # planted: jobs 2 and 3's configs wait at the first freeze, then stay frozen after their jobs
    assert alive_at_freeze == ([2, 2, 2] if planted else [0, 0, 0])


class Cycle:
    """An object only the collector frees (it refers to itself)."""

    def __init__(self) -> None:
        self.itself = self


@pytest.mark.parametrize("collect", [True, False], ids=["collected", "planted-no-collect"])
def test_what_a_job_leaves_is_collected_before_the_rest_is_frozen(tmp_path, monkeypatch, collect):
    """After each job the launcher collects the job's garbage, then freezes what survives (the
    modules the job imported), so later full collections skip it; cyclic garbage of the job
    (a planted self-referring object) must be gone by then, else freezing would keep it for good.
    With the collection planted away, the check sees the cycle frozen."""
    from ascendbench.job import launcher, runner

    cycles, alive_at_freeze = [], []
    real_run = runner._run_claimed

    def run_with_a_cycle(cfg, job_dir):
        cycles.append(weakref.ref(Cycle()))
        return real_run(cfg, job_dir)

    def freeze() -> None:
        alive_at_freeze.append(sum(ref() is not None for ref in cycles))
        gc.freeze()

    monkeypatch.setattr(runner, "_run_claimed", run_with_a_cycle)
    monkeypatch.setattr(launcher, "gc", SimpleNamespace(
        collect=gc.collect if collect else (lambda: 0), freeze=freeze))
    gc.disable()  # no automatic pass: only the launcher's own collection may free the cycles
    try:
        result = run_app(["-m", *TINY, "preset.iters=2,3"], tmp_path)
    finally:
        gc.enable()
    assert result.returncode == 0, result.output
    assert len(cycles) == 2 and len(alive_at_freeze) == 2  # a freeze after each job
    assert alive_at_freeze == ([0, 0] if collect else [1, 2])
