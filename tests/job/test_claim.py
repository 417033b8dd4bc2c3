"""The job directory claim: one holder at a time, refusals in one paragraph (ascendbench.job.claim).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ascendbench.errors import JobDirBusyError, JobDirError
from ascendbench.job import claim as claim_module
from ascendbench.job.claim import LOCK_NAME, check_job_dir, claim, holder_of, release

TRY_CLAIM = "import sys; from ascendbench.job.claim import claim; claim(sys.argv[1])"


def held(job):
    """Whether this process holds the claim of ``job`` (the module's table of acquired locks)."""
    return os.path.abspath(str(job)) in claim_module._HELD


def test_claim_is_held_until_released_and_reentrant_in_one_process(tmp_path):
    job = tmp_path / "job"
    assert claim(job) is True and held(job)
    try:
        # the holder may claim again (the CLI claims before Hydra, then the job)
        assert claim(job) is False
        other = subprocess.run([sys.executable, "-c", TRY_CLAIM, str(job)], capture_output=True,
                               text=True)
        assert other.returncode != 0 and "JobDirBusyError" in other.stderr
        assert f"pid {os.getpid()}" in holder_of(job)
    finally:
        release(job)
    assert not held(job)
    assert (job / LOCK_NAME).exists(), "the lock file stays (removing it would race)"
    after = subprocess.run([sys.executable, "-c", TRY_CLAIM, str(job)], capture_output=True,
                           text=True)
    assert after.returncode == 0, after.stderr


def test_busy_message_names_the_directory_and_what_to_do(tmp_path):
    job = tmp_path / "job"
    proc = subprocess.Popen([sys.executable, "-c",
                             TRY_CLAIM + "; print('held', flush=True); sys.stdin.read()",
                             str(job)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(JobDirBusyError) as caught:
            claim(job)
        message = str(caught.value)
        assert str(job) in message and f"pid {proc.pid}" in message and "hydra.run.dir=" in message
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_check_refuses_a_file_and_a_record_that_is_a_directory(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(JobDirError, match="is a file"):
        check_job_dir(a_file)
    (tmp_path / "job" / "record.json").mkdir(parents=True)
    with pytest.raises(JobDirError, match="record.json exists and is not a file"):
        check_job_dir(tmp_path / "job", "hydra.sweep.dir")
    assert check_job_dir(tmp_path / "new" / "dir") == tmp_path / "new" / "dir"


def test_a_lock_file_planted_as_a_link_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    job = tmp_path / "job"
    job.mkdir()
    (job / LOCK_NAME).symlink_to(victim)
    with pytest.raises(JobDirError, match="is a symbolic link"):
        claim(job)
    assert victim.read_text() == "precious" and not held(job)


def test_a_link_planted_after_the_check_is_not_followed_either(tmp_path, monkeypatch):
    """The lock opens without following links: the check's window cannot be used either."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    job = tmp_path / "job"
    job.mkdir()
    (job / LOCK_NAME).symlink_to(victim)
    monkeypatch.setattr(type(job / LOCK_NAME), "is_symlink", lambda self: False)
    with pytest.raises(JobDirError, match="cannot be used as the job directory"):
        claim(job)
    assert victim.read_text() == "precious" and not held(job)
