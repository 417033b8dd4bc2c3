"""ascendbench's sweeper: Hydra's basic grid (job order, numbering, batches, multirun.yaml) with
every job's config composed once, and a bad swept value still refused before any job runs."""

from __future__ import annotations

import pickle

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl  # the tests count compositions
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # the oracle of the grid
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf

from ascendbench.job.sweeper import ComposedConfigs, ComposeOnceSweeper

from helpers import TINY_RUN, run_app

TINY = ["model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process",
        "compare.visual.enabled=false", "bench.flops.enabled=false",
        "hydra.callbacks.summary.collect_env_timeout_s=0"]


def _sweeper(params: dict | None = None) -> ComposeOnceSweeper:
    sweeper = ComposeOnceSweeper(params=params)
    sweeper.loader = None  # no glob(): no loader needed
    return sweeper


@pytest.mark.parametrize("arguments", [
    [], ["a=1,2", "b=x,y,z"], ["a=range(0,3)", "b=choice(x,y)", "c=5"], ["+x=1,2", "a=3", "a=4,5"],
    ["p=w", "q='a,b',c"],
])
def test_the_grid_is_hydras_basic_grid(arguments):
    params = {"p": "u,v"}
    parsed = OverridesParser.create().parse_overrides(["p=u,v", *arguments])
    assert _sweeper(params).jobs(arguments) == BasicSweeper.split_arguments(parsed, None)[0]


def test_an_interval_is_refused():
    with pytest.raises(HydraException, match="Can only enumerate CHOICE and RANGE sweeps"):
        _sweeper().jobs(["a=interval(0,1)"])


def test_other_processes_get_the_loader_without_the_composed_configs():
    loader = ComposedConfigs("the loader")
    loader.composed[("a=1",)] = OmegaConf.create({"a": 1})
    copied = pickle.loads(pickle.dumps(loader))
    assert (copied.loader, copied.composed, len(loader.composed)) == ("the loader", {}, 1)


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


def test_each_job_is_composed_once_in_order_across_batches(tmp_path, compositions):
    result = run_app(["-m", *TINY, "dtype=glob(float3*)", "preset.iters=2,3",
                      "hydra.sweeper.max_batch_size=1"], tmp_path)
    assert result.returncode == 0, result.output
    def swept(overrides):
        return sorted(o for o in overrides if o.startswith(("dtype=", "preset.iters=")))

    jobs = [["dtype=float32", "preset.iters=2"], ["dtype=float32", "preset.iters=3"]]
    assert [swept(c) for c in compositions] == jobs  # Hydra's basic sweeper composes each twice
    ran = [OmegaConf.load(p).hydra for p in result.job_dir.glob("*/.hydra/hydra.yaml")]
    assert sorted((h.job.num, swept(h.overrides.task)) for h in ran) == list(enumerate(jobs))
    assert (result.job_dir / "multirun.yaml").is_file()


@pytest.mark.parametrize("bad", ["preset.iters=2,abc", "model=tiny_flux2_decoder,no_such_model"])
def test_a_bad_swept_value_is_refused_before_any_job_runs(tmp_path, compositions, bad):
    result = run_app(["-m", *TINY, bad], tmp_path)
    assert result.returncode == 1
    assert bad.split("=")[0] in result.output and bad.rsplit(",")[-1] in result.output
    assert not list(result.job_dir.rglob("record.json")), "a job ran before the refusal"
    assert len(compositions) == 2  # the first job composed, the second refused
