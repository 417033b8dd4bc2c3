"""Sweeps: the ready-made sweep and launcher configs compose; real Hydra multiruns of the tiny model
give the summary, the report and resume (in this process: the basic launcher runs its jobs in the
caller's process), and, in subprocesses (`slow`), joblib cards, submitit and a killed job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from ascendbench.config import config_dir, group_options
from ascendbench.report.__main__ import main as report_main

from helpers import Result, compose_config, run_app, run_cli

TINY = ["model=tiny_flux2_decoder", "device=cpu", "preset.height=32", "preset.width=32",
        "preset.warmup=0",
        "preset.iters=2"]
# What these tests are not about, turned off to keep each job near a second: the reference runs in
# the
# job's process (CPU only), no side-by-side pictures, no FLOP count.
FAST = ["baseline.process=in-process", "compare.visual.enabled=false", "bench.flops.enabled=false"]


@pytest.fixture
def compose_hydra():
    """Compose with the hydra node included (sweeper params, launcher, callbacks)."""

    def _compose(overrides):
        return compose_config(overrides, return_hydra_config=True)

    return _compose


@pytest.mark.parametrize("name", group_options("sweep"))
def test_every_ready_made_sweep_sweeps_real_keys(compose_hydra, name):
    params = compose_hydra([f"+sweep={name}"]).hydra.sweeper.params
    assert params, f"sweep {name} sweeps nothing"
    for key, values in params.items():
        for value in str(values).split(","):
            job = compose_hydra([f"+sweep={name}", f"{key}={value}"])
            group = key in group_options_of_config()
            chosen = job[key].name if group else OmegaConf.select(job, key)
            assert str(chosen) == value, (name, key, value)


def group_options_of_config() -> set[str]:
    """Config groups of the job (a swept group is checked by the chosen option's name)."""
    return {"model", "device", "dtype", "preset", "metric", "bench", "baseline"}


def test_flux2_perf_is_the_seed_grid_of_square_images(compose_hydra):
    cfg = compose_hydra(["+sweep=flux2_perf", "preset.height=1024"])
    assert cfg.model.name == "flux2_small_decoder" and cfg.dtype.name == "float16"
    assert cfg.preset.width == 1024 and (cfg.preset.warmup, cfg.preset.iters) == (5, 20)
    assert cfg.baseline.enabled is False
    assert dict(cfg.hydra.sweeper.params) == {"preset.batch_size": "1,2,4",
                                              "preset.height": "512,1024"}
    assert compose_hydra(["+sweep=flux2_perf",
                          "model=tiny_flux2_decoder"]).model.name == "tiny_flux2_decoder"


def test_launcher_configs(compose_hydra):
    joblib = compose_hydra(["hydra/launcher=joblib_cards"]).hydra
    assert joblib.launcher.n_jobs == len(joblib.callbacks.cards.cards) == 2
    assert list(joblib.callbacks) == ["cards", "guard", "summary",
                                      "progress"], "cards are claimed first, then the sweep dir"
    slurm = compose_hydra(["hydra/launcher=slurm_cards"]).hydra
    assert slurm.launcher._target_.endswith("SlurmLauncher")
    assert slurm.launcher.gpus_per_node == 1 and slurm.launcher.tasks_per_node == 1
    assert slurm.launcher.array_parallelism == 8 and slurm.callbacks.cards.cards is None


def test_sweep_job_dirs_are_named_by_overrides_without_long_values(compose_hydra):
    raw = OmegaConf.to_container(OmegaConf.load(config_dir() / "config.yaml"), resolve=False)
    subdir = "${ascendbench.subdir:${hydra.job.override_dirname},${hydra.overrides.task}}"
    assert raw["hydra"]["sweep"]["subdir"] == subdir
    hydra = compose_hydra([]).hydra
    assert {"model.source", "resume.force",
            "sweep"} <= set(hydra.job.config.override_dirname.exclude_keys)


def test_job_subdir_is_readable_unique_and_stable():
    from ascendbench.job.launch import MAX_NAME_BYTES, job_subdir

    assert job_subdir("dtype=float16,seed=1", ["dtype=float16", "seed=1"]) == "dtype=float16,seed=1"
    a = job_subdir("seed=1", ["seed=1", "model.source=/ckpt/a"])
    b = job_subdir("seed=1", ["seed=1", "model.source=/ckpt/b"])
    assert a.startswith("seed=1_")
    assert b.startswith("seed=1_")
    assert a != b, "a hidden override tells jobs apart"
    assert a == job_subdir("seed=1",
                           ["model.source=/ckpt/a", "seed=1"]), "stable: resume finds the record"
    forced = job_subdir("seed=1", ["seed=1", "resume.force=true"])
    assert forced == "seed=1", "resume.* say how a job is resumed, not which job it is"
    long = job_subdir("seed=1,model.name=" + "m" * 300, ["seed=1", "model.name=" + "m" * 300])
    assert len(long.encode()) <= MAX_NAME_BYTES + 9 and long.startswith("seed=1_"), long
    assert "/" not in job_subdir("baseline.source=/a/b", ["baseline.source=/a/b"])


def _env(tmp_path: Path) -> dict:
    return {"ASCENDBENCH_CACHE": str(tmp_path / "cache")}


def _multirun(tmp_path: Path, sweep: Path, *overrides: str, run=run_app) -> Result:
    """``python -m ascendbench -m`` of the tiny job with ``overrides``: ``run_app`` in this process
    or ``run_cli``."""
    return run(["-m", *TINY, *FAST, *overrides], cwd=tmp_path, env=_env(tmp_path), out_dir=sweep)


def _records(sweep: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sweep.rglob("record.json")}


def test_multirun_summary_report_and_resume(tmp_path):
    sweep = tmp_path / "multirun" / "grid"
    first = _multirun(tmp_path, sweep, "dtype=float32,bfloat16", "preset=mini,balanced",
                      "fail_on=null")
    assert first.returncode == 0, first.stderr[-3000:]
    records = _records(sweep)
    assert len(records) == 4 and {r["status"] for r in records.values()} == {"ok"}
    assert all("dtype=" in name
               and "preset=" in name for name in records), "job dirs named by their overrides"
    for name in records:  # what Hydra and the job write beside each record, composed for this job
        hydra_dir = sweep / name / ".hydra"
        assert (sweep / name / "ascendbench.log").stat().st_size > 0
        assert set(OmegaConf.load(hydra_dir / "overrides.yaml")) == set(name.split(","))
        job_cfg = OmegaConf.load(hydra_dir / "config.yaml")
        hydra_cfg = OmegaConf.load(hydra_dir / "hydra.yaml")
        assert f"dtype={job_cfg.dtype.name}" in name and f"preset={job_cfg.preset.name}" in name
        assert hydra_cfg.hydra.runtime.output_dir == str(sweep / name)
    summary = pd.read_csv(sweep / "summary.csv")
    assert len(summary) == 4 and set(summary["job.dtype"]) == {"float32", "bfloat16"}
    assert "4 job record(s): 4 ok." in (sweep / "summary.md").read_text()
    # the sweep's environment, once
    assert "PyTorch version:" in (sweep / "collect_env.txt").read_text()
    assert len(list(sweep.rglob("collect_env.txt"))) == 1, "not per job"

    assert report_main([str(sweep), "--out", str(tmp_path / "reports"), "--no-plots"]) == 0
    text = (tmp_path / "reports" / "report.md").read_text()
    # the section alone, up to the next one
    accuracy = text.split("\n## Accuracy\n", 1)[1].split("\n## ", 1)[0]
    assert accuracy.count("/record.json)") == 4
    # bfloat16 fails mean_rel_err on the tiny model
    assert "| not recommended | bfloat16 †" in text

    stamps = {p: p.stat().st_mtime_ns for p in sweep.rglob("record.json")}
    again = _multirun(tmp_path, sweep, "dtype=float32,bfloat16", "preset=mini,balanced",
                      "fail_on=null")
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("resume: skipped") == 4
    assert {p: p.stat().st_mtime_ns
            for p in sweep.rglob("record.json")} == stamps, "no record rewritten"


@pytest.mark.slow
def test_joblib_workers_get_distinct_cards_and_a_failed_job_fails_the_sweep(tmp_path):
    sweep = tmp_path / "multirun" / "cards"
    result = _multirun(tmp_path, sweep, "hydra/launcher=joblib_cards", "preset.height=32,31",
                       run=run_cli)
    # a failed job in another process still makes the exit status non-zero
    assert result.returncode == 1
    records = _records(sweep)
    statuses = {name.split("preset.height=")[1].split(",")[0]: r["status"]
                for name, r in records.items()}
    assert statuses == {"32": "ok", "31": "failed"}
    failed = next(r for r in records.values() if r["status"] == "failed")
    assert failed["error"]["type"] == "TaskError"
    summary = (sweep / "summary.md").read_text()
    assert "2 job record(s): 1 failed, 1 ok." in summary
    assert "TaskError: preset.height=31" in summary
    notes = [json.loads(p.read_text()) for p in sweep.rglob("card.json")]
    assert len(notes) == 2 and {n["card"] for n in notes} <= {"0", "1"}
    by_pid = {}
    for note in notes:
        assert note["visible"] == {"ASCEND_RT_VISIBLE_DEVICES": note["card"],
                                   "CUDA_VISIBLE_DEVICES": note["card"]}
        by_pid.setdefault(note["pid"], set()).add(note["card"])
    assert all(len(cards) == 1 for cards in by_pid.values()), "a worker keeps its card"
    assert len({c for cards in by_pid.values()
                for c in cards}) == len(by_pid), "distinct workers, distinct cards"


@pytest.mark.slow
def test_submitit_local_executor(tmp_path):
    sweep = tmp_path / "multirun" / "submitit"
    result = _multirun(tmp_path, sweep, "hydra/launcher=submitit_local", "dtype=float32",
                       run=run_cli)
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((sweep / ".submitit").iterdir()), "the job went through submitit"
    summary = pd.read_csv(sweep / "summary.csv")
    assert list(summary["status"]) == ["ok"] and list(summary["job.dtype"]) == ["float32"]


@pytest.mark.slow
def test_a_killed_job_never_leaves_an_ok_record(tmp_path):
    job_dir = tmp_path / "outputs" / "killed"
    args = [sys.executable, "-m", "ascendbench", *TINY, *FAST, "preset.iters=1000000",
            "preset.max_time_s=600",
            f"hydra.run.dir={job_dir}"]
    proc = subprocess.Popen(args, cwd=tmp_path,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", **_env(tmp_path)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while (not (job_dir / "record.json").exists() and time.monotonic() < deadline
               and proc.poll() is None):
            time.sleep(0.2)
        assert (job_dir / "record.json").exists(), "the job writes its record as soon as it starts"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    record = json.loads((job_dir / "record.json").read_text())
    assert record["status"] == "running"
    assert report_main([str(tmp_path / "outputs"), "--out", str(tmp_path / "reports"),
                        "--no-plots"]) == 0
    assert "no final status: the job was killed" in (tmp_path / "reports" / "report.md").read_text()


@pytest.mark.slow
def test_a_worker_without_a_free_card_fails_its_job_instead_of_sharing_a_card(tmp_path):
    """Another sweep holds card 0 of a shared lock dir: the job is `failed` (no_free_card), never
    run on it."""
    from filelock import FileLock

    locks = tmp_path / "cards"
    locks.mkdir()
    holder = FileLock(str(locks / "card-0.lock"))
    holder.acquire()
    try:
        sweep = tmp_path / "multirun" / "busy"
        result = _multirun(tmp_path, sweep, "hydra/launcher=joblib_cards",
                           "hydra.launcher.n_jobs=1",
                           "hydra.callbacks.cards.cards=[0]",
                           f"hydra.callbacks.cards.lock_dir={locks}",
                           "hydra.callbacks.cards.wait_s=0.5", run=run_cli)
    finally:
        holder.release()
    assert result.returncode == 1, result.output[-3000:]
    (record,) = _records(sweep).values()
    assert record["status"] == "failed" and record["error"]["reason"] == "no_free_card"
    assert "no free card in the pool ['0']" in record["error"]["message"]
    # nothing was timed on a card another sweep holds
    assert "bench" not in record or not record["bench"]
    assert not list(sweep.rglob("card.json")), "no card noted for the job"
