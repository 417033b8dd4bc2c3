"""``dry_run=true``: the plan of a job, with nothing loaded and nothing downloaded."""

from __future__ import annotations

import socket

import pytest
import torch

from ascendbench.job import planning as plan_module
from ascendbench.models.sources import files_digest

from helpers import build_tiny_flux2, run_job

FAST = ["model=tiny_flux2_decoder", "device=cpu", "preset.height=32", "preset.width=32",
        "preset.warmup=0",
        "preset.iters=2", "bench.flops.enabled=false", "baseline.process=in-process"]


@pytest.fixture
def job(compose_cfg, tmp_path):
    """``job(*overrides)`` composes and runs one job in-process; returns its record (``cfg_tiny``
    where the tiny job itself, with a value or two set, is all a test needs)."""

    def run(*overrides: str, name: str = "job"):
        cfg = compose_cfg([*FAST, f"baseline.cache_dir={tmp_path / 'cache'}", *overrides])
        return run_job(cfg, tmp_path / name)

    return run


@pytest.fixture
def nothing_loads(monkeypatch):
    """Any weight read or download fails the test."""
    import diffusers
    import huggingface_hub
    import safetensors.torch

    def forbidden(*args, **kwargs):
        raise AssertionError("a dry run must not load or download weights")

    monkeypatch.setattr(safetensors.torch, "load_file", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(diffusers.ModelMixin, "from_pretrained", classmethod(forbidden))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", forbidden)


def test_plan_of_a_local_directory(job, tiny_flux2_dir, nothing_loads, capsys, tmp_path):
    record = job(f"model.source={tiny_flux2_dir}", "model.weights=required", "dry_run=true")
    assert record["status"] == "ok", record["error"]
    plan = record["plan"]
    weights = plan["weights"]
    assert weights["action"] == "load" and weights["path"] == str(tiny_flux2_dir.resolve())
    assert weights["digest"] == files_digest(tuple(sorted(tiny_flux2_dir.glob("*.safetensors"))))
    model = build_tiny_flux2()
    assert plan["memory"]["num_params"] == sum(t.numel()
                                               for t in [*model.parameters(), *model.buffers()])
    assert plan["memory"]["num_params_on_disk"] == sum(t.numel()
                                                       for t in model.state_dict().values())
    assert plan["memory"]["device_run"]["fits"]
    assert plan["memory"]["cpu_reference"]["dtype"] == "float64"
    assert plan["inputs"]["latent"]["shape"] == [1, 4, 16, 16]
    assert plan["baseline"]["cache_hit"] is False and plan["baseline"]["precision"] == "float64"
    assert str(tmp_path / "job" / "record.json") in plan["outputs"] and plan["problems"] == []
    assert record["weights"] is None and record["bench"] is None, "nothing ran"
    out = capsys.readouterr().out
    assert "dry run: tiny_flux2_decoder on cpu" in out
    assert "problems  none" in out
    assert "cache miss" in out


def test_plan_after_a_real_job_sees_the_cached_reference(cfg_tiny, tmp_path):
    assert run_job(cfg_tiny, tmp_path / "real")["status"] == "ok"
    cfg_tiny.dry_run = True
    plan = run_job(cfg_tiny, tmp_path / "job")["plan"]
    assert plan["weights"]["action"] == "random-init" and plan["baseline"]["cache_hit"] is True
    assert "cpu_reference" not in plan["memory"], "a cached reference needs no memory"


def test_every_problem_is_listed_and_the_dry_run_fails(job, tmp_path, capsys):
    record = job(f"model.source={tmp_path / 'absent'}", "model.weights=required",
                 "preset.height=33", "dry_run=true")
    assert record["status"] == "failed" and record["error"]["reason"] == "dry_run"
    problems = record["plan"]["problems"]
    assert len(problems) == 2
    assert any("model.weights=required but no weights were found" in p for p in problems)
    assert any("preset.height=33" in p for p in problems)
    assert "2 problem(s)" in record["error"]["message"]
    assert capsys.readouterr().out.count("PROBLEM") == 2


def test_memory_that_does_not_fit_is_a_problem(cfg_tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(plan_module, "available_host_bytes", lambda: 64 << 10)  # 64 KiB
    cfg_tiny.dry_run = True
    # the whole-model reference's line (auto would plan a replay)
    cfg_tiny.baseline.reference_mode = "whole"
    record = run_job(cfg_tiny, tmp_path / "job")
    assert record["status"] == "failed"
    memory = record["plan"]["memory"]
    assert not memory["device_run"]["fits"] and not memory["cpu_reference"]["fits"]
    assert any(p.startswith("CPU reference in float64 needs about")
               for p in record["plan"]["problems"])


def test_uncached_hub_id_would_download_without_touching_the_network(job, monkeypatch, tmp_path,
                                                                     nothing_loads):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    def no_network(*args, **kwargs):
        raise AssertionError("a dry run must not open a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    record = job("model.source=some-org/some-model", "model.weights=auto", "dry_run=true")
    assert record["status"] == "ok", record["error"]
    weights = record["plan"]["weights"]
    assert weights["action"] == "download" and weights["endpoint"] == constants.ENDPOINT
    assert "random-init" in weights["reason"] and record["plan"]["baseline"]["cache_hit"] is None
    assert constants.HF_HUB_OFFLINE is False, "the forced offline mode is undone"


def test_pickle_checkpoint_is_a_problem(job, tmp_path):
    path = tmp_path / "vae.pt"
    torch.save(build_tiny_flux2().state_dict(), path)
    record = job(f"model.source={path}", "model.weights=auto", "dry_run=true")
    assert record["plan"]["weights"]["action"] == "refused"
    assert any("model.allow_pickle=true" in p for p in record["plan"]["problems"])


def _reference_needs(cfg):
    """Host bytes of the tiny job's in-process reference in float64 and in float32 (as the stage
    estimates)."""
    from hydra.utils import instantiate

    from ascendbench.baseline.memory import HostBudget, estimate_reference

    task = instantiate(cfg.model.task)
    inputs = task.make_inputs(cfg.preset, int(cfg.seed))
    model = build_tiny_flux2()
    return [int(estimate_reference(model, task, inputs, d,
                                   HostBudget(child_process=False, available=1 << 40))
                ["host_need_mb"] * 1e6) for d in (torch.float64, torch.float32)]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_auto_reference_is_float64_for_every_device_dtype_when_it_fits(job, dtype):
    plan = job(f"dtype={dtype}", "dry_run=true")["plan"]
    assert plan["baseline"]["precision"] == "float64"
    assert plan["memory"]["cpu_reference"]["dtype"] == "float64"
    assert plan["memory"]["cpu_reference"]["choice"].startswith("auto: float64")


def test_auto_falls_back_to_float32_only_when_float64_does_not_fit(compose_cfg, tmp_path,
                                                                   monkeypatch):
    from ascendbench.baseline import memory as resources  # the reference's memory guard

    cfg = compose_cfg([*FAST, f"baseline.cache_dir={tmp_path / 'cache'}", "preset.iters=1"])
    f64, f32 = _reference_needs(cfg)
    between = int((f64 + f32) / 2 / resources.DEFAULT_HEADROOM)
    monkeypatch.setattr(plan_module, "available_host_bytes", lambda: between)
    monkeypatch.setattr(resources, "available_host_bytes", lambda: between)
    cfg.dry_run = True
    plan = run_job(cfg, tmp_path / "plan")["plan"]
    assert plan["baseline"]["precision"] == "float32" and plan["memory"]["cpu_reference"]["fits"]
    assert plan["memory"]["cpu_reference"]["float64"]["dtype"] == "float64"
    cfg.dry_run = False
    record = run_job(cfg, tmp_path / "real")
    assert record["status"] == "ok", record["error"]
    checked = record["resources"]["reference"]
    assert record["job"]["reference_dtype"] == "float32" and checked["dtype"] == "float32"
    assert not checked["float64"]["fits"] and "float64 reference needs about" in checked["choice"]
    explicit = run_job(compose_cfg([*FAST, f"baseline.cache_dir={tmp_path / 'cache'}",
                                    "preset.iters=1",
                                    "baseline.reference=float64"]), tmp_path / "explicit")
    assert explicit["status"] == "failed"
    assert "refusing the CPU reference" in explicit["error"]["message"]
