"""Sweeps and exit statuses: "Data loss" (one subdir for two jobs, sweep dirs shared by two sweeps),
"False verdicts and exit statuses" (resume after the checkpoint changed, ``fail_on`` under joblib),
and the job-side "Crashes" and "Message quality" cases of the config and the single-layer loader."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf
from safetensors.torch import save_file

from helpers import build_tiny_flux2

TINY = "model=tiny_flux2_decoder"


def _records(sweep: Path) -> dict[Path, dict]:
    return {p.parent: json.loads(p.read_text()) for p in sweep.rglob("record.json")}


# --- Data loss: sweep subdirs unique per job, sweep dirs unique per sweep -------------------------


def test_data_loss_sweep_over_model_source_gives_each_job_its_own_dir(
    app, fast, tmp_path, tiny_flux2_dir
):
    first, second = tmp_path / "ckpt-a", tmp_path / "ckpt-b"
    shutil.copytree(tiny_flux2_dir, first)
    build_tiny_flux2(seed=1).save_pretrained(second, safe_serialization=True)
    code, console, sweep = app(
        TINY, *fast, f"model.source={first},{second}", "model.weights=required", multirun=True
    )
    assert code == 0, console[-3000:]
    records = _records(sweep)
    assert len(records) == 2, (
        f"two jobs, {len(records)} record(s): one overwrote the other ({list(records)})"
    )
    sources = {Path(r["weights"]["source"]).name for r in records.values()}
    assert sources == {"ckpt-a", "ckpt-b"}
    digests = {r["weights"]["digest"] for r in records.values()}
    assert len(digests) == 2


def test_crash_300_character_override_value_in_a_sweep_gets_a_short_unique_dir(app, fast, tmp_path):
    long_name = "m" * 300
    code, console, sweep = app(TINY, *fast, f"model.name={long_name}", "seed=1,2", multirun=True)
    assert code == 0, console[-3000:]
    assert "Traceback" not in console and "File name too long" not in console
    records = _records(sweep)
    assert len(records) == 2
    assert all(len(d.name.encode()) <= 255 for d in records), [d.name for d in records]
    assert {r["config"]["seed"] for r in records.values()} == {1, 2}


@pytest.fixture
def frozen_clock(monkeypatch):
    """Hydra's ``now`` resolver stopped on one second: two sweeps "started in the same second"."""
    from datetime import datetime

    import hydra.core.utils

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 1, 0, 0, 0)

    monkeypatch.setattr(hydra.core.utils, "datetime", Frozen)


def _default_sweep_dir() -> str:
    import ascendbench.cli  # noqa: F401  (registers the resolvers, as the CLI does)

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
            cfg = compose(config_name="config", return_hydra_config=True)
            return str(cfg.hydra.sweep.dir)
    finally:
        GlobalHydra.instance().clear()


def test_data_loss_two_sweeps_started_in_the_same_second_get_two_dirs(frozen_clock):
    first, second = _default_sweep_dir(), _default_sweep_dir()
    assert first.startswith("multirun/2026-01-01/00-00-00")
    assert first != second, "two sweeps of the same second share one sweep dir"


def test_exit_status_another_sweeps_failed_record_in_the_sweep_dir_is_not_ours(app, fast, tmp_path):
    sweep = tmp_path / "sweep"
    other = sweep / "other-sweeps-job"
    other.mkdir(parents=True)
    (other / "record.json").write_text(
        json.dumps({"status": "failed", "verdict": None, "config": {}})
    )
    later = other.stat().st_mtime + 3600  # written while this sweep runs
    os.utime(other / "record.json", (later, later))
    code, console, _ = app(TINY, *fast, "seed=1", multirun=True, out_dir=sweep)
    assert code == 0, "another sweep's failed job set this sweep's exit status"


# --- False verdicts and exit statuses -------------------------------------------------------------


def test_false_verdict_resume_after_the_checkpoint_changed_runs_again(
    app, fast, tmp_path, tiny_flux2_dir, record_of
):
    source = tmp_path / "ckpt"
    shutil.copytree(tiny_flux2_dir, source)
    job = tmp_path / "job"
    args = (TINY, *fast, f"model.source={source}", "model.weights=required", f"hydra.run.dir={job}")
    code, _, _ = app(*args)
    assert code == 0
    old = record_of(job)["weights"]["digest"]
    build_tiny_flux2(seed=7).save_pretrained(
        source, safe_serialization=True
    )  # same path, other weights
    code, console, _ = app(*args)
    assert code == 0
    assert "resume: skipped" not in console and "weights at model.source changed" in console
    assert record_of(job)["weights"]["digest"] != old
    code, console, _ = app(*args)
    assert "resume: skipped" in console, "unchanged weights: the job is skipped again"


@pytest.mark.slow
def test_message_two_copies_of_one_sweep_one_runs_the_jobs_the_other_says_busy_once(
    popen, fast, tmp_path
):
    """Copy A pauses in its first job (holding the sweep dir) until the test releases it, and copy
    B, the same command, starts meanwhile: B runs nothing and says so in one paragraph, exit 1; A
    counts its own 3 jobs (never 6) and exits 0 by their verdicts."""
    sweep, marker, release = tmp_path / "sweep", tmp_path / "paused", tmp_path / "release"
    args = ["-m", "model=slow_tiny", *fast, "seed=1,2,3", f"hydra.sweep.dir={sweep}",
            "model.task.pause_s=600", "model.task.pause_seed=1", f"model.task.marker={marker}",
            f"model.task.release={release}"]
    first = popen(*args)
    deadline = time.monotonic() + 300  # a generous bound on a loaded host, not a timing claim
    while not marker.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "copy A never reached its first job"
    second = popen(*args)
    said, _ = second.communicate(timeout=300)
    release.touch()
    ran, _ = first.communicate(timeout=300)
    assert second.returncode == 1 and "Traceback" not in said, said[-3000:]
    assert said.count("is in use by another ascendbench process") == 1, said[-3000:]
    for needle in (f"hydra.sweep.dir={sweep}", f"pid {first.pid} on ", "run the same command"):
        assert needle in said, (needle, said[-3000:])
    assert "[sweep] job" not in said, "the refused copy started no job"
    assert first.returncode == 0, ran[-3000:]
    assert "3 finished (3 ok)" in ran and "busy" not in ran, ran[-3000:]
    assert [r["status"] for r in _records(sweep).values()] == ["ok"] * 3


@pytest.mark.slow
def test_false_exit_status_fail_on_under_joblib_with_two_workers(popen, fast, tmp_path):
    sweep = tmp_path / "sweep"
    proc = popen(
        "-m",
        "model=nan_tiny",
        *fast,
        "seed=1,2",
        "fail_on=FAIL",
        "hydra/launcher=joblib_cards",
        "hydra.launcher.n_jobs=2",
        "hydra.callbacks.cards.cards=[0,1]",
        f"hydra.sweep.dir={sweep}",
    )
    output, _ = proc.communicate(timeout=300)
    verdicts = [r["verdict"] for r in _records(sweep).values()]
    assert verdicts == ["FAIL", "FAIL"], (verdicts, output[-3000:])
    assert proc.returncode == 1, "fail_on=FAIL ignored for jobs run in joblib workers"


# --- Crashes and messages of the config and the loader --------------------------------------------


def test_crash_seed_out_of_range_is_a_config_error_naming_the_range(app, fast, record_of):
    code, console, job = app(TINY, *fast, "seed=99999999999999999999")
    assert code == 1
    error = record_of(job)["error"]
    assert error["reason"] == "config", error
    assert (
        "seed=99999999999999999999 is not allowed" in error["message"]
        and "2**63 - 1" in error["message"]
    )
    assert "Overflow" not in console and "Traceback" not in console


def test_message_batch_size_zero_suggests_batch_size_not_height(app, fast, record_of):
    code, _, job = app(TINY, *fast, "preset.batch_size=0")
    assert code == 1
    message = record_of(job)["error"]["message"]
    assert "preset.batch_size=0 is not allowed" in message and "`preset.batch_size=...`" in message
    assert "preset.height" not in message


def test_message_single_layer_source_file_is_the_file_whatever_loader_filename_says(tmp_path):
    from hydra.utils import instantiate

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                "model=tiny_ltx_video_vae_conv_in",
                "model.loader.filename=diffusion_pytorch_model.safetensors",
            ],
        )
    GlobalHydra.instance().clear()
    loader = instantiate(cfg.model.loader)
    torch.manual_seed(3)
    conv = instantiate(OmegaConf.to_container(cfg.model.loader.module))
    path = tmp_path / "my_layer.safetensors"
    save_file(
        {f"{cfg.model.loader.prefix}{k}": v.contiguous() for k, v in conv.state_dict().items()},
        str(path),
    )
    loaded = loader.load(str(path), "required", 42)
    assert loaded.weights["kind"] == "loaded" and loaded.weights["source"] == str(path.resolve())
    assert torch.equal(loaded.module.weight, conv.weight)
