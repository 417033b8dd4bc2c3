"""Cross-field rules and the hand checks of the untyped keys: every problem named at once, before a
job runs."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ascendbench.config.rules import check_config, config_problems
from ascendbench.errors import ConfigError


def _problems(compose_job, overrides):
    cfg = compose_job(overrides, hydra=True)
    return config_problems(cfg, OmegaConf.to_container(cfg.hydra.runtime.choices))


@pytest.mark.parametrize("overrides", [[], ["model=tiny_videoflextok", "preset=quality"],
                                       ["model=tiny_ltx_t2v", "device=npu", "dtype=float16"],
                                       ["preset.iters=3", "preset.max_iters=1"]])
def test_shipped_configs_have_no_problems(compose_job, overrides):
    assert _problems(compose_job, overrides) == []


@pytest.mark.parametrize("overrides, expected", [
    (["preset.max_iters=2"],
     "preset.max_iters=2 is not allowed: it must be an integer >= preset.min_iters (5)"),
    (["preset.min_time_s=60"],
     "preset.min_time_s=60.0 is not allowed: it must be seconds >= 0 and <= preset.max_time_s "
     "(30.0)"),
    (["bench.warmup=-1"], "bench.warmup=-1 is not allowed: it must be an integer >= 0"),
    (["preset.iters=0"], "preset.iters=0 is not allowed: it must be an integer >= 1, or null"),
    (["bench.precision=0"], "bench.precision=0.0 is not allowed: it must be a ratio > 0 and < 1"),
    (["bench.precision=1.5"], "bench.precision=1.5 is not allowed: it must be a ratio > 0 and < 1"),
    (["preset.height=0"], "preset.height=0 is not allowed: it must be an integer >= 1"),
    (["preset.batch_size=-2"], "preset.batch_size=-2 is not allowed"),
    (["dtype=float32", "dtype.atol=-1"],
     "dtype.atol=-1.0 is not allowed: it must be a tolerance >= 0"),
    (["dtype.by_device.cpu=auto"], "dtype.by_device="),
    (["device.order=[cpu,cpu]"], "device.order=['cpu', 'cpu'] is not allowed"),
    (["device.world_size=2"], "device.world_size=2 needs a parallel mode"),
    (["baseline.lock_timeout_s=0"],
     "baseline.lock_timeout_s=0.0 is not allowed: it must be seconds > 0"),
    (["+model.thresholds.cosine={min:0.9,max:1.0}"],
     "model.thresholds.cosine: threshold rule for metric 'cosine'"),
    (["+metric.thresholds.psnr_db=30"],
     "metric.thresholds.psnr_db=30 is not allowed: it must be a rule"),
    (["model.weights=required", "model.source=null"], "model.weights=required needs model.source"),
    (["baseline.source=/tmp/run", "baseline.enabled=false"],
     "baseline.source is set but baseline.enabled=false"),
    (["model.patches=[no_such_patch]"], "no_such_patch"),
    (["compare.visual.frames=[first,bogus]"],
     "compare.visual.frames=['first', 'bogus'] is not allowed"),
    (["compare.visual.value_range=[1.0,-1.0]"],
     "compare.visual.value_range=[1.0, -1.0] is not allowed"),
    (["compare.divergence.statistics=[max,median]"], "compare.divergence.statistics="),
    (["compare.layers={a:1}"], "compare.layers={'a': 1} is not allowed"),
    (["baseline.key_ignore_preset=[name,warmpu]"], "['warmpu'] are not"),
    (["model=tiny_flux2_decoder", "model.loader.architecture.layers_per_block=abc"],
     "model.loader.architecture.layers_per_block='abc' must be an integer "
     "(conf/model/tiny_flux2_decoder.yaml has 1)"),
    (["model.task.latent_channels=[1]"], "model.task.latent_channels=[1] must be an integer"),
    (["+model.loader.class_paht=x"], "model.loader: keys"),
])
def test_each_rule_names_key_value_and_what_is_allowed(compose_job, overrides, expected):
    problems = _problems(compose_job, overrides)
    assert any(expected in problem for problem in problems), problems


def test_budget_problems_name_the_bench_key_when_it_no_longer_reads_the_preset(compose_job):
    problems = _problems(compose_job, ["bench.max_iters=1"])
    assert problems == ["bench.max_iters=1 is not allowed: it must be an integer >= "
                        "preset.min_iters (5)"]


def test_check_config_lists_every_problem_in_one_paragraph(compose_job):
    cfg = compose_job(["preset.max_iters=2", "preset.height=0", "model.weights=required",
                       "model.source=null"])
    with pytest.raises(ConfigError) as failure:
        check_config(cfg, choices={})
    message = str(failure.value)
    assert "3 problem(s)" in message and "\n" not in message
    for part in ("preset.height=0", "preset.max_iters=2",
                 "model.weights=required needs model.source",
                 "e.g. `preset.height=...`", "--cfg job"):
        assert part in message, message
    assert failure.value.reason == "config"


def test_check_config_passes_a_sound_config(compose_job):
    assert check_config(compose_job(["model=tiny_flux2_decoder"]), choices={}) is None


def test_a_broken_interpolation_is_one_problem(compose_job):
    problems = config_problems(compose_job(["preset.width=${preset.nope}"]), choices={})
    assert (len(problems) == 1 and problems[0].startswith("the config does not resolve")
            and "preset.nope" in problems[0])


def test_an_unresolvable_config_gets_no_made_up_example_key(compose_job):
    """A cycle of interpolations has no key to name: no "(e.g. `the=...`)" from its sentence."""
    with pytest.raises(ConfigError) as failure:
        check_config(compose_job(["+a=${b}", "+b=${a}"]), choices={})
    message = str(failure.value)
    assert "the config does not resolve" in message and "e.g." not in message, message
