"""``dry_run_target``: a dry run plans for the machine the job will run on; the plan tells the
device side's problems from the reference's (``problems_by_stage``)."""

from __future__ import annotations

import pytest

from ascendbench.models import memory

from helpers import run_job

TINY = ["model=tiny_flux2_decoder", "device=cpu", "preset.height=32", "preset.width=32",
        "bench.flops.enabled=false",
        "baseline.reference_mode=replay", "dry_run=true"]


@pytest.fixture
def small_host(monkeypatch):
    """This host has 64 KiB free: nothing fits here."""
    monkeypatch.setattr(memory, "measured_host_bytes", lambda: 64 << 10)


def test_a_host_too_small_fails_the_plan_and_names_the_stages(compose_cfg, tmp_path, small_host,
                                                              capsys):
    record = run_job(compose_cfg([*TINY, f"baseline.cache_dir={tmp_path}"]), tmp_path / "job")
    assert record["status"] == "failed" and record["error"]["reason"] == "dry_run"
    by_stage = record["plan"]["problems_by_stage"]
    assert by_stage["load"] == by_stage["device_run"] == by_stage["replay_reference"] == 1
    assert by_stage["inputs"] == by_stage["reference"] == 0
    assert "does not fit here" in record["plan"]["memory"]["replay_reference"]["planned_alone"]
    assert "device_run 1 problem" in capsys.readouterr().out


def test_a_declared_target_is_planned_for_and_this_host_is_still_said(compose_cfg, tmp_path,
                                                                      small_host, capsys):
    cfg = compose_cfg([*TINY, f"baseline.cache_dir={tmp_path}", "dry_run_target.host_memory_gb=64",
                       # 52 KB: the later calls would not be recorded
                       "baseline.replay.max_capture_mb=0.05"])
    record = run_job(cfg, tmp_path / "job")
    assert record["status"] == "ok", record["error"]
    plan = record["plan"]
    assert plan["target"] == {"host_memory_gb": 64.0} and plan["problems"] == []
    assert plan["memory"]["device_run"]["free_mb"] == 64e3 and plan["memory"]["device_run"]["fits"]
    replay = plan["memory"]["replay_reference"]
    # device=cpu: the job's float32 model stays beside the process
    held = plan["memory"]["num_params"] * 4 / 1e6
    assert replay["job_holds_mb"] == pytest.approx(held)
    assert replay["fits"] and replay["host_available_mb"] == pytest.approx(64e3 - held)
    assert replay["fits_this_host"] is False
    # a model this host cannot hold: the process alone
    assert replay["this_host_available_mb"] == (64 << 10) / 1e6
    out = capsys.readouterr().out
    assert "planned for the machine declared in dry_run_target (host 64.0 GB free)" in out
    assert "(this host: " in out and "GB free, does not fit)" in out
    assert memory.available_host_bytes() == 64 << 10, "the declaration ends with the dry run"
    assert replay["dropped"] and replay["dropped"][-1] == "decoder.conv_out#0"
    assert "beyond baseline.replay.max_capture_mb would not be recorded" in out


def test_a_declared_size_that_is_not_positive_is_named(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, f"baseline.cache_dir={tmp_path}",
                       "dry_run_target.device_memory_gb=0"])
    record = run_job(cfg, tmp_path / "job")
    assert record["status"] == "failed"
    assert any(p.startswith("dry_run_target.device_memory_gb=0.0 is not allowed")
               for p in record["plan"]["problems"])
