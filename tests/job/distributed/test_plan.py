"""The dry run of a multi-card job plans memory per rank and refuses what the ranks could not run.
"""

from __future__ import annotations

import pytest

from helpers.app import read_record, run_app

TINY_T2V = ["model=tiny_ltx_t2v", "device=cpu", "preset.height=32", "preset.width=32",
            "preset.steps=2",
            "dry_run=true", "baseline.enabled=false"]


def test_a_device_map_plan_has_one_memory_line_per_rank_and_the_host(tmp_path):
    result = run_app([*TINY_T2V, "device.world_size=2", "device.parallel=device_map"], tmp_path)
    assert result.returncode == 0, result.output[-2000:]
    plan = read_record(result.job_dir)["plan"]["memory"]["device_run"]
    assert (plan["world_size"], plan["mode"], plan["backend"]) == (2, "device_map", "gloo")
    ranks = plan["per_rank"]
    assert [r["what"].split(" (")[0] for r in ranks] == ["rank 0 of 2", "rank 1 of 2"]
    assert "blocks 0:1" in ranks[0]["activation_note"]
    assert "blocks 1:2" in ranks[1]["activation_note"]
    single = read_record(run_app(TINY_T2V, tmp_path,
                                 out_dir=tmp_path / "one").job_dir)["plan"]["memory"]
    # the blocks are split
    assert all(r["num_params"] < single["device_run"]["num_params"] for r in ranks)
    assert plan["host"]["need_mb"] == pytest.approx(sum(r["need_mb"] for r in ranks))
    assert "rank 1 of 2 (device_map) on cpu" in result.output


def test_a_plan_of_context_parallel_on_the_cpu_fails_with_the_reason(tmp_path):
    result = run_app([*TINY_T2V, "device.world_size=2", "device.parallel=context"], tmp_path)
    assert result.returncode == 1
    problems = " ".join(read_record(result.job_dir)["plan"]["problems"])
    assert "device.parallel=context cannot run on cpu" in problems
