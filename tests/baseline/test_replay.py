"""The replay reference on the tiny twins: local errors checked against the module run by hand in
float64 on the recorded inputs, and the same first divergent module as the whole-model reference on
a planted fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open

from ascendbench.compare.capture import decode
from ascendbench.compare.hooks import flatten_tensors
from ascendbench.compare.select import named_modules

from helpers.app import TINY_RUN, run_app
from helpers.planted import planted_fault

CASES = {
    "vae": (["model=tiny_flux2_decoder", "metric=regression"],
            "[decoder.conv_in,decoder.mid_block,'decoder.up_blocks[:]',decoder.conv_out]",
            "decoder.up_blocks.1"),
    "t2v": (["model=tiny_ltx2_t2v", "preset.steps=1", "preset.num_frames=9", "metric=regression",
             "baseline.replay.calls=[first]"],
            "['transformer.transformer_blocks[:]']", "transformer.transformer_blocks.1"),
}


def _record(path: Path) -> dict[str, Any]:
    return json.loads((path / "record.json").read_text())


def _job(tmp_path: Path, name: str, args: list[str]) -> dict[str, Any]:
    quick = ["compare.visual.enabled=false", "artifacts.media=false", "preset.iters=1",
             "preset.min_iters=1",
             "bench.flops.enabled=false"]
    result = run_app([*args, *TINY_RUN, *quick,
                      f"baseline.cache_dir={tmp_path / 'cache'}", "fail_on=null"], tmp_path,
                     out_dir=tmp_path / name)
    record = _record(result.job_dir)
    assert record["status"] == "ok", (result.output[-3000:], record.get("error"))
    return record


@pytest.fixture(scope="module", params=sorted(CASES))
def faulted(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The replay and the whole-model reference (``compare.layers=all``) of one twin with a planted
    fault."""
    args, layers, module = CASES[request.param]
    tmp_path = tmp_path_factory.mktemp(request.param)
    replay = _job(tmp_path, "replay", [*args, "baseline.reference_mode=replay",
                                       f"baseline.replay.layers={layers}",
                                       planted_fault(module)])
    whole = _job(tmp_path, "whole", [*args, "baseline.reference_mode=whole", "compare.layers=all",
                                     planted_fault(module)])
    return {"replay": replay, "whole": whole, "dir": tmp_path / "replay", "module": module,
            "args": args}


def test_replay_names_the_same_first_divergent_module_as_the_whole_model_reference(
        faulted: dict[str, Any]) -> None:
    replay, whole = faulted["replay"]["compare"], faulted["whole"]["compare"]
    assert faulted["replay"]["baseline"]["mode"] == "replay"
    assert replay["first_divergent"]["module"] == faulted["module"]
    assert whole["first_divergent"]["module"].split("#")[0] == faulted["module"]
    first = whole["first_divergent"]["module"].split("#")[0]
    assert replay["first_divergent"]["call"].split("#")[0] == first
    assert faulted["replay"]["verdict"] == "FAIL"
    failing = {r["module"] for r in replay["results"].values() if r["result"] == "FAIL"}
    assert failing == {faulted["module"]}  # the later ones, on the device's own inputs, pass


def _by_hand(job_dir: Path, module: torch.nn.Module, key: str, index: int) -> float:
    """||dev - ref|| / ||ref|| of one recorded call, the module run here in float64 on the recorded
    inputs."""
    manifest = json.loads((job_dir / "replay" / "manifest.json").read_text())
    call = next(c for c in manifest["calls"] if c["key"] == key)
    with safe_open(str(job_dir / "replay" / "calls" / call["file"]), framework="pt") as handle:
        def tensor(name: str) -> torch.Tensor:
            value = handle.get_tensor(name)
            return value.double() if value.is_floating_point() else value

        with torch.no_grad():
            args, kwargs = decode(call["args"], tensor), decode(call["kwargs"], tensor)
            ref = flatten_tensors(module(*args, **kwargs))[index]
        dev = handle.get_tensor(call["outputs"][index]).double()
    return float(torch.linalg.vector_norm(dev - ref) / torch.linalg.vector_norm(ref))


def test_local_errors_match_the_module_run_by_hand_in_float64(faulted: dict[str, Any]) -> None:
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    with initialize_config_module("ascendbench.conf", version_base="1.3"):
        cfg = compose("config", overrides=faulted["args"])
    model = instantiate(cfg.model.loader).load(None, "random", 42).module  # the job's random init
    named = named_modules(model)
    results = faulted["replay"]["compare"]["results"]
    checked = 0
    for name, row in results.items():
        if row.get("local_rel_err") is None:
            continue
        key, _, index = name.partition("/")
        module = named[row["module"]].to(torch.float64)
        by_hand = _by_hand(faulted["dir"], module, key, int(index or 0))
        assert by_hand == pytest.approx(row["local_rel_err"], rel=1e-6, abs=1e-12)
        checked += 1
    assert checked >= 3


def test_auto_replays_when_the_whole_model_reference_does_not_fit(compose_cfg, tmp_path,
                                                                  monkeypatch) -> None:
    from ascendbench.baseline import memory as resources  # the reference's memory guard
    from ascendbench.job import planning

    from helpers.config import run_job

    monkeypatch.setattr(planning, "available_host_bytes", lambda: 64 << 20)  # no reference fits
    monkeypatch.setattr(resources, "available_host_bytes", lambda: 64 << 20)
    cfg = compose_cfg(["model=tiny_flux2_decoder", *TINY_RUN, "preset.iters=1",
                       "bench.flops.enabled=false",
                       "compare.visual.enabled=false", "artifacts.media=false",
                       "baseline.replay.layers=[decoder.conv_in]",
                       f"baseline.cache_dir={tmp_path / 'cache'}", "fail_on=null"])
    cfg.dry_run = True
    plan = run_job(cfg, tmp_path / "plan")["plan"]
    assert plan["baseline"]["mode"] == "replay"
    assert plan["baseline"]["reason"].startswith("auto: the whole-model")
    assert plan["memory"]["replay_reference"]["largest_module"]["name"] == "decoder.conv_in"
    problems = plan["problems"]  # 64 MB: the replay does not fit either
    assert any(p.startswith("the replay reference needs about") for p in problems)
    cfg.dry_run = False
    record = run_job(cfg, tmp_path / "real")
    assert record["status"] == "ok", record["error"]
    assert record["baseline"]["mode"] == "replay"
    assert "refusing the CPU reference" in record["baseline"]["reason"]
    assert record["compare"]["results"]["decoder.conv_in#0"]["result"] == "PASS"


def test_the_measured_peak_of_each_module_is_within_its_plan_and_a_planted_under_estimate_is_caught(
        faulted: dict[str, Any]) -> None:
    from ascendbench.baseline.replay_memory import memory_check

    memory = faulted["replay"]["compare"]["memory"]
    check = memory["check"]
    assert check["modules"] and check["under_estimated"] == [], check
    assert memory["precision"] == faulted["replay"]["compare"]["precision"] == "float64"
    results = json.loads((faulted["dir"] / "replay" / "results.json").read_text())
    measured = results["modules"]
    assert faulted["replay"]["compare"]["process"]["peak_rss_mb"] == max(
        [m["peak_rss_mb"] for m in measured] + [results["imports_peak_rss_mb"]])
    planted = {**memory, "child_imports_mb": memory["child_imports_mb"] / 10}  # a tenth of them
    assert memory_check(planted, measured)["under_estimated"] == [m["module"] for m in measured]
