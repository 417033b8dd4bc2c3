"""Typed schemas: a wrong type or an unknown enum value fails at compose time, before a job
directory exists."""

from __future__ import annotations

import json
import pickle

import pytest
from hydra.core.config_store import ConfigStore
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from ascendbench.config import schemas

from helpers import run_app


def _message(exc: BaseException) -> str:
    """Hydra's message with its cause, on one line (what the CLI prints)."""
    return " ".join(f"{exc} {exc.__cause__ or ''}".split())


@pytest.mark.parametrize("overrides, expected", [
    (["model.weights=maybe"], ["model.weights", "expected one of [auto, required, random]"]),
    (["preset.iters=abc"], ["preset.iters", "could not be converted to Integer"]),
    (["seed=x"], ["full_key: seed", "could not be converted to Integer"]),
    (["dry_run=perhaps"], ["full_key: dry_run", "is not a valid bool"]),
    (["fail_on=ERROR"], ["full_key: fail_on", "expected one of [WARN, FAIL]"]),
    (["baseline.reference=float16"],
     ["baseline.reference", "expected one of [auto, same, float32, float64]"]),
    (["baseline.process=thread"], ["baseline.process", "expected one of [child, in-process]"]),
    (["dtype=float32", "dtype.name=float8"],
     ["dtype.name", "expected one of [auto, float32, float16, bfloat16]"]),
    (["dtype.by_device.cpu=int8"],
     ["dtype.by_device.cpu", "expected one of [auto, float32, float16, bfloat16]"]),
    (["device=cpu", "device.name=gpu"], ["device.name", "expected one of [auto, cpu, cuda, npu]"]),
    (["device.order=[npu,tpu]"], ["device.order", "expected one of [cpu, cuda, npu]"]),
    (["compare.visual.layout=CTHW"],
     ["compare.visual.layout", "expected one of [auto, BCTHW, BTCHW]"]),
    (["artifacts.max_tensor_mb=lots"],
     ["artifacts.max_tensor_mb", "could not be converted to Float"]),
    (["model=tiny_flux2_decoder", "model.init_seed=abc"],
     ["model.init_seed", "could not be converted to Integer"]),
    (["preset.heigth=64"], ["Key 'heigth' not in 'PresetConfig'", "+preset.heigth=64"]),
])
def test_wrong_types_and_unknown_values_fail_at_compose_time(compose_job, overrides, expected):
    with pytest.raises(ConfigCompositionException) as failure:
        compose_job(overrides)
    text = _message(failure.value)
    assert all(part in text for part in expected), text


@pytest.mark.parametrize("overrides, key, value", [
    (["+metric.thresholds.mean_rel_err={max:0.02,source:my-team}"],
     "metric.thresholds.mean_rel_err.max", 0.02),
    (["+model.thresholds.cosine={min:0.999,source:x}"], "model.thresholds.cosine.min", 0.999),
    (["+device.peak.table.MyCard={match:[MyCard],bfloat16:100,source:vendor}"],
     "device.peak.table.MyCard.bfloat16",
     100),
    (["device.peak.override.bfloat16=280"], "device.peak.override.bfloat16", 280),
    (["+baseline.memory_check=false"], "baseline.memory_check", False),
    (["+model.extra=1"], "model.extra", 1),
    (["model.task.latent_channels=8"], "model.task.latent_channels", 8),
    (["device=cuda", "device.env.CUDA_VISIBLE_DEVICES=1"], "device.env.CUDA_VISIBLE_DEVICES", "1"),
    (["compare.layers=[decoder.mid_block]"], "compare.layers", ["decoder.mid_block"]),
    (["+sweep=flux2_perf", "preset.height=512"], "preset.width", 512),
])
def test_documented_overrides_and_added_keys_still_compose(compose_job, overrides, key, value):
    cfg = compose_job(overrides)
    found = OmegaConf.select(cfg, key)
    assert (OmegaConf.to_container(found) if OmegaConf.is_config(found) else found) == value


def test_interpolations_resolve_through_typed_fields(compose_job):
    cfg = compose_job(["preset.warmup=7", "preset.iters=4", "seed=3", "model.allow_pickle=true"])
    assert (cfg.bench.warmup, cfg.bench.iters) == (7, 4)
    assert cfg.model.init_seed == cfg.seed == 3 and cfg.model.loader.allow_pickle is True
    t2v = compose_job(["model=ltx_video_t2v"])
    assert (list(t2v.compare.layers) == list(t2v.model.compare_layers)
            and t2v.model.codebook_size is None)


def test_enum_values_read_as_their_strings(compose_job):
    cfg = compose_job(["baseline.process=in-process", "fail_on=WARN"])
    weights, process = cfg.model.weights, cfg.baseline.process
    assert (weights == "auto" and str(weights) == "auto" and f"{weights}" == "auto"
            and repr(weights) == "'auto'")
    assert process == "in-process" and {"in-process": 1}[process] == 1 and cfg.fail_on == "WARN"
    record = OmegaConf.to_container(cfg.baseline, resolve=True)
    assert json.loads(json.dumps(record))["process"] == "in-process"
    assert pickle.loads(pickle.dumps(process)) is schemas.BaselineProcess["in-process"]
    assert "process: in-process" in OmegaConf.to_yaml(cfg.baseline)


def test_every_group_is_typed_by_its_schema(compose_job):
    cfg = compose_job()
    assert (OmegaConf.get_type(cfg.preset) is schemas.PresetConfig
            and OmegaConf.get_type(cfg.model) is schemas.ModelConfig)
    assert OmegaConf.get_type(cfg.device).__name__ == "AutoDeviceConfig"
    assert OmegaConf.get_type(compose_job(["device=npu"]).device).__name__ == "NpuDeviceConfig"
    assert OmegaConf.get_type(compose_job(["dtype=float16"]).dtype).__name__ == "DtypeRulesConfig"
    assert OmegaConf.get_type(cfg.metric) is dict, "metric stays open"


def test_registration_is_idempotent_and_done_by_the_config_package():
    import ascendbench.conf  # noqa: F401  (what Hydra imports to read pkg://ascendbench.conf)

    schemas.register()
    schemas.register()
    names = {key.removesuffix(".yaml") for key in ConfigStore.instance().repo}
    assert set(schemas.SCHEMAS) <= names
    assert list(schemas.Weights) == ["auto", "required", "random"]


def test_cli_rejects_an_unknown_enum_value_before_any_job_dir(tmp_path):
    job_dir = tmp_path / "job"
    done = run_app(["dry_run=true", "model.weights=maybe", f"hydra.run.dir={job_dir}"], tmp_path)
    assert done.returncode != 0
    console = done.output
    assert "model.weights" in console and "expected one of [auto, required, random]" in console, (
        console)
    assert "Traceback" not in console
    assert not job_dir.exists() and not list(tmp_path.rglob("record.json"))

