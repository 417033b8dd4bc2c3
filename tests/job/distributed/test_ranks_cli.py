"""Multi-card jobs through the real CLI on this host: 2 gloo ranks on 127.0.0.1, the tiny LTX-Video
twin.

The single-rank run, the cfg run and the device_map run start together (their reference is computed
once and shared through the cache); each parallel run's outputs must equal the single-rank run's
within float32 rounding, and its record must carry both ranks' memory and the synchronized latency.
A rank killed with SIGKILL must fail its job naming the rank, with no rank left alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from safetensors.torch import load_file

from ascendbench.job.distributed.ranks import SYNC_CLOCK

from helpers.app import BASE_ENV, TINY_RUN, read_record

pytestmark = pytest.mark.slow  # true CLI subprocesses that spawn ranks

TINY_T2V = ["model=tiny_ltx_t2v", *TINY_RUN, "preset.steps=2", "artifacts.media=false",
            "bench.flops.enabled=false"]
RANKS = {"single": [], "cfg": ["device.world_size=2", "device.parallel=cfg"],
         "device_map": ["device.world_size=2", "device.parallel=device_map"]}


def _start(job_dir: Path, extra: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ascendbench", *TINY_T2V, *extra,
                             f"hydra.run.dir={job_dir}"],
                            cwd=job_dir.parent, env={**os.environ, **BASE_ENV},
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ranks")
    started = {name: (root / name, _start(root / name, extra)) for name, extra in RANKS.items()}
    for name, (_, process) in started.items():
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"{name}:\n{output[-3000:]}"
    return {name: job_dir for name, (job_dir, _) in started.items()}


def _outputs(job_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(job_dir / "tensors" / "device.safetensors"))


@pytest.mark.parametrize("mode", ["cfg", "device_map"])
def test_two_ranks_give_the_single_rank_outputs_and_one_record(runs, mode):
    single, parallel = _outputs(runs["single"]), _outputs(runs[mode])
    assert single.keys() == parallel.keys()
    for name in single:
        # float32 tolerances: rounding only
        torch.testing.assert_close(parallel[name], single[name])
    record = read_record(runs[mode])
    # the accuracy gate judged the ranks' outputs
    assert record["status"] == "ok" and record["verdict"] == "PASS"
    assert record["metrics"]["placement_findings"]["verdict"] == "PASS", "rank 0's check"
    section = record["distributed"]
    assert (section["world_size"], section["backend"], section["mode"]) == (2, "gloo", mode)
    assert [r["rank"] for r in section["ranks"]] == [0, 1] and section["outputs_agree"] is True
    assert all(r["peak_allocated_mb"] > 0 for r in record["bench"]["memory_per_rank"])
    assert record["bench"]["timer"] == SYNC_CLOCK and record["bench"]["latency"]["median_ms"] > 0
    assert record["bench"]["latency"]["median_ms"] >= max(r["median_ms"]
                                                          for r in section["ranks"]) * 0.999
    assert not (runs[mode] / "record.json").parent.joinpath("ranks", "rank0.error.json").exists()


def test_cfg_ranks_ran_one_guidance_branch_each(runs):
    ranks = read_record(runs["cfg"])["distributed"]["ranks"]
    assert [r["mode"]["branch"] for r in ranks] == ["conditional", "unconditional"]
    assert all(r["mode"]["denoiser_calls_split"] > 0 for r in ranks)


def test_device_map_ranks_hold_different_blocks(runs):
    ranks = read_record(runs["device_map"])["distributed"]["ranks"]
    by_rank = ranks[0]["mode"]["by_rank"]
    assert by_rank["0"] != by_rank["1"] and by_rank["0"].startswith("transformer.")
    assert all(r["mode"]["held_block_mb"] > 0 for r in ranks)


def test_a_killed_rank_fails_the_job_naming_it_and_leaves_no_process(tmp_path):
    job_dir = tmp_path / "killed"
    process = _start(job_dir, [*RANKS["cfg"], "bench.iters=100000"])
    pid_file = job_dir / "ranks" / "rank1.pid"
    deadline = time.monotonic() + 300
    while not pid_file.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    children = psutil.Process(process.pid).children(recursive=True)
    victim = int(pid_file.read_text())
    os.kill(victim, signal.SIGKILL)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 1, output[-3000:]
    record = read_record(job_dir)
    assert record["status"] == "failed" and record["error"]["reason"] == "rank_failed"
    assert f"rank 1 of 2 (pid {victim}) was killed by signal SIGKILL" in record["error"]["message"]
    assert "rank 1 of 2" in output
    ranks = set(record["distributed"]["pids"])
    assert victim in ranks and ranks <= {c.pid for c in children}
    assert not [p for p in ranks if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    # multiprocessing's resource tracker exits after its parent
    _, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, alive


def test_the_report_shows_scaling_as_a_table_and_a_plot(runs, tmp_path):
    from ascendbench.report.document import Report
    from ascendbench.report.gather import records_frame
    from ascendbench.report.settings import load_settings

    report = Report(records_frame([runs["single"].parent]), load_settings(), ["ranks"])
    plots = report.make_plots(tmp_path / "plots")
    scaling = report.markdown(tmp_path).split("\n## Scaling over cards")[1].split("\n## ")[0]
    rows = [line for line in scaling.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split(" | ")[:2] for row in rows] == [["| 1", "none"], ["| 2", "cfg"],
                                                      ["| 2", "device_map"]]
    # every median read from its record
    assert all("missing" not in row.split(" | ")[3] for row in rows)
    assert any(p.name.startswith("scaling_tiny_ltx_t2v") and p.stat().st_size > 0 for p in plots)
