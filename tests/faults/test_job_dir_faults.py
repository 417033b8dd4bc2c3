"""The job directory: "Data loss" (two jobs in one dir), "Crashes with tracebacks" (job side) and
"Message quality" (disk full, file modes). Each test is named after the case it plants.

Read-only: as root, chmod does not stop writes, so a directory under ``/sys`` (a read-only file
system in a container) stands in for it; full disk: the seams of ``seams.py`` (``os.fsync`` /
safetensors failing with ENOSPC), so that nothing fills the real disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbench.fileio import default_mode

TINY = "model=tiny_flux2_decoder"
HOLDER = """
import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, json.dumps({"pid": os.getpid(), "host": "holder", "since": "now"}).encode())
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def hold_lock():
    """``hold_lock(job_dir)``: another process holds the job dir's lock (as a running job does)
    until the test ends; returns that process."""
    holders: list[subprocess.Popen] = []

    def hold(job_dir: Path) -> subprocess.Popen:
        job_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(job_dir / ".ascendbench.lock")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        holders.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in holders:
        proc.stdin.close()
        proc.wait(timeout=30)


def _one_paragraph(console: str, *needles: str) -> None:
    assert "Traceback" not in console, console[-3000:]
    for needle in needles:
        assert needle in console, (needle, console[-3000:])


def _read_only_dir(tmp_path: Path) -> Path:
    """A directory nothing can be written into (``/sys`` as root; a chmod-ed one otherwise)."""
    if os.geteuid() == 0:
        if not Path("/sys").is_dir():
            pytest.skip(
                "running as root without a read-only /sys to stand in for a read-only file system"
            )
        return Path("/sys") / f"ascendbench-job-{os.getpid()}"
    locked = tmp_path / "read-only"
    locked.mkdir()
    locked.chmod(0o500)
    return locked / "job"


# --- Data loss: two jobs, one directory -----------------------------------------------------------


def test_data_loss_two_jobs_same_run_dir_second_refuses_and_leaves_the_first_alone(
    app, fast, tmp_path, hold_lock
):
    job = tmp_path / "shared-job"
    holder = hold_lock(job)
    code, console, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 1, "the second claimant must exit non-zero"
    _one_paragraph(
        console, "is in use by another ascendbench process", f"pid {holder.pid}", "hydra.run.dir="
    )
    assert not (job / "record.json").exists(), (
        "the refused job wrote a record into the other job's dir"
    )
    assert not (job / ".hydra").exists() and not (job / "ascendbench.log").exists(), (
        "Hydra wrote there first"
    )


def test_data_loss_same_sweep_twice_skips_jobs_another_process_holds(
    app, fast, tmp_path, hold_lock, record_of
):
    sweep = tmp_path / "sweep"
    code, _, _ = app(TINY, *fast, "seed=1,2", multirun=True, out_dir=sweep)
    assert code == 0
    dirs = sorted(p.parent for p in sweep.glob("*/record.json"))
    assert len(dirs) == 2
    held, free = dirs
    before = (held / "record.json").read_bytes()
    hold_lock(held)  # the first sweep is still running this job
    code, console, _ = app(
        TINY, *fast, "seed=1,2", "resume.force=true", multirun=True, out_dir=sweep
    )
    assert code == 1, "a sweep that could not run one of its jobs must not exit 0"
    _one_paragraph(console, "job not run (busy)", str(held), "2 finished (1 ok, 1 busy)",
                   "run the same command again")
    assert console.count("is in use by another ascendbench process") == 1, console[-3000:]
    assert (held / "record.json").read_bytes() == before, "the held job's record was overwritten"
    assert record_of(free)["status"] == "ok"


# --- Crashes with tracebacks: unusable run dirs ---------------------------------------------------


def test_crash_run_dir_on_a_read_only_file_system_is_one_paragraph(app, fast, tmp_path):
    job = _read_only_dir(tmp_path)
    code, console, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 1
    _one_paragraph(
        console, f"hydra.run.dir={job} cannot be used as the job directory", "writable directory"
    )


def test_crash_sweep_dir_on_a_read_only_file_system_is_one_paragraph(app, fast, tmp_path):
    sweep = _read_only_dir(tmp_path)
    code, console, _ = app(TINY, *fast, "seed=1,2", multirun=True, out_dir=sweep)
    assert code == 1
    _one_paragraph(console, f"hydra.sweep.dir={sweep} cannot be used as the job directory")


def test_crash_run_dir_on_a_full_file_system_is_one_paragraph(app, fast, tmp_path, monkeypatch):
    import shutil

    total = shutil.disk_usage(tmp_path).total
    monkeypatch.setattr(
        shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(total, total, 1024)
    )
    job = tmp_path / "job"
    code, console, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 1
    _one_paragraph(console, "its disk has only 0.0 MB free")
    assert not (job / "record.json").exists() and not (job / ".hydra").exists()


def test_crash_run_dir_name_too_long_is_one_paragraph(app, fast, tmp_path):
    code, console, _ = app(TINY, *fast, f"model.name={'m' * 300}", "hydra.run.dir=${model.name}")
    assert code == 1
    _one_paragraph(console, "longer than the file system allows")


def test_crash_run_dir_that_is_a_file_is_one_paragraph_and_the_file_is_kept(app, fast, tmp_path):
    job = tmp_path / "a-file"
    job.write_text("precious")
    code, console, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 1
    _one_paragraph(console, f"hydra.run.dir={job} cannot be used as the job directory", "is a file")
    assert job.read_text() == "precious"


def test_crash_record_json_that_is_a_directory_is_one_paragraph(app, fast, tmp_path):
    job = tmp_path / "job"
    (job / "record.json").mkdir(parents=True)
    code, console, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 1
    _one_paragraph(console, "record.json exists and is not a file")
    assert (job / "record.json").is_dir()


def test_crash_deeply_nested_record_json_is_not_resumed_the_job_runs(
    app, fast, tmp_path, record_of
):
    job = tmp_path / "job"
    job.mkdir()
    (job / "record.json").write_text("[" * 200_000 + "]" * 200_000)  # RecursionError in json.loads
    code, console, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 0, console[-3000:]
    assert "Traceback" not in console and "cannot be read (RecursionError" in console
    assert record_of(job)["status"] == "ok"


def test_crash_disk_full_mid_job_leaves_no_running_record_and_one_paragraph(
    app, fast, tmp_path, monkeypatch
):
    from seams import NO_SPACE, DiskFullAfter

    job = tmp_path / "job"
    monkeypatch.setattr(os, "fsync", DiskFullAfter(allowed=3))  # the first record writes succeed
    code, console, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 1
    _one_paragraph(
        console, "could not write", NO_SPACE, "job failed (OutputWriteError, reason write)"
    )
    path = job / "record.json"
    assert not path.exists() or json.loads(path.read_text())["status"] != "running", (
        "a record says running"
    )


# --- Message quality: disk full while saving artifacts; file modes --------------------------------


def test_message_disk_full_saving_tensors_names_the_file_and_drops_the_verdict(
    app, fast, tmp_path, monkeypatch, record_of
):
    import ascendbench.compare.files as artifacts  # save_tensors writes through its save_file

    from seams import safetensors_disk_full

    monkeypatch.setattr(artifacts, "save_file", safetensors_disk_full)
    job = tmp_path / "job"
    code, console, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 1
    record = record_of(job)
    assert record["status"] == "failed" and record["verdict"] is None, (
        "a failed record must not say PASS"
    )
    assert record["error"]["verdict_before_failure"] == "PASS"
    message = record["error"]["message"]
    assert (
        str(job / "tensors") in message
        and ".safetensors" in message
        and "disk" in message
        and "full" in message
    )
    assert "Traceback" not in console
    assert not list(job.rglob("*.tmp")), "a partial temporary file was left behind"


def test_message_record_and_tensors_are_written_with_the_umask_mode(app, fast, tmp_path):
    job = tmp_path / "job"
    code, _, _ = app(TINY, *fast, f"hydra.run.dir={job}")
    assert code == 0
    files = [job / "record.json", *sorted((job / "tensors").glob("*.safetensors"))]
    assert len(files) > 1
    modes = {f.name: oct(f.stat().st_mode & 0o777) for f in files}
    assert set(modes.values()) == {oct(default_mode())}, modes
