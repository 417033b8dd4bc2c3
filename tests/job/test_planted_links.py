"""Nothing is written through a link planted in a job or sweep directory: a victim file the link
points at keeps its content, and the job is refused with one paragraph."""

from __future__ import annotations

import shutil

import pytest

from ascendbench.errors import JobDirError
from ascendbench.job.claim import check_job_dir

from helpers import TINY_RUN, run_app

TINY = ["model=tiny_flux2_decoder", *TINY_RUN]


def _victim(path, text="precious"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_copied_run_dir_with_a_linked_hydra_file_is_refused_before_hydra_writes(tmp_path):
    """A re-run of a copied run dir (a resume skip) whose .hydra/overrides.yaml is a link: Hydra
    would write the job's overrides through it (a planted lock file: tests/job/test_claim.py)."""
    assert run_app(TINY, cwd=tmp_path, out_dir=tmp_path / "job").returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "job", copy)
    overrides = _victim(tmp_path / "FILE2")
    (copy / ".hydra" / "overrides.yaml").unlink()
    (copy / ".hydra" / "overrides.yaml").symlink_to(overrides)
    result = run_app(TINY, cwd=tmp_path, out_dir=copy)
    assert overrides.read_bytes() == b"precious"
    assert result.returncode != 0 and "is a symbolic link" in result.output


def test_tensors_and_images_linked_out_of_the_job_dir_are_not_written_through(tmp_path):
    outside = tmp_path / "outside"
    kept = [_victim(outside / "device.safetensors"), _victim(outside / "image_device_0.png")]
    job = tmp_path / "job"
    job.mkdir()
    for name in ("tensors", "images"):
        (job / name).symlink_to(outside)
    result = run_app(TINY, cwd=tmp_path, out_dir=job)
    assert [p.read_bytes() for p in kept] == [b"precious", b"precious"]
    assert sorted(p.name for p in outside.iterdir()) == sorted(p.name for p in kept)
    assert result.returncode != 0 and f"{job / 'images'} is a symbolic link" in result.output


def test_a_link_in_a_job_of_a_sweep_dir_is_refused_with_the_sweep(tmp_path):
    """Hydra writes a sweep job's .hydra before any callback of the job runs: the sweep's own
    check finds the link in the job directories it holds."""
    victim = _victim(tmp_path / "victim")
    (tmp_path / "sweep" / "model=a" / ".hydra").mkdir(parents=True)
    (tmp_path / "sweep" / "model=a" / ".hydra" / "config.yaml").symlink_to(victim)
    with pytest.raises(JobDirError, match="config.yaml is a symbolic link"):
        check_job_dir(tmp_path / "sweep", "hydra.sweep.dir")
    assert victim.read_bytes() == b"precious"

