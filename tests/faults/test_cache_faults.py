"""Trusted caches: a baseline cache entry that was replaced, truncated, edited or written by an
older version is rejected (one log line naming the file and why), recorded and recomputed; the job
still ends ok with the right numbers. A kill -9 of a job during its reference takes the reference
process with it, and the next job computes the reference."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from helpers import read_record, run_app

JOB = ["model=tiny_flux2_decoder"]
METRIC = "mean_rel_err"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """One job's cache (the reference computed once for the module) and its record."""
    from faults.conftest import FAST, SEARCHPATH

    root = tmp_path_factory.mktemp("pristine")
    cache = root / "cache"
    result = run_app([*JOB, *FAST, f"baseline.cache_dir={cache}", SEARCHPATH], cwd=root)
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(result.job_dir)
    return cache, record


@pytest.fixture
def planted(pristine, cache_dir):
    """A private copy of the pristine cache; returns the entry directory of the job's reference."""
    cache, record = pristine
    shutil.copytree(cache, cache_dir)
    return cache_dir / record["baseline"]["cache_key"]


def _rerun(app, fast, out_dir=None):
    code, output, job = app(*JOB, *fast, out_dir=out_dir)
    return code, output, read_record(job)


def _assert_recomputed(code, output, record, pristine, bad_file: str, why: str):
    """The job ends ok, its reference was recomputed (not trusted, not fatal) and equals the
    pristine one."""
    assert code == 0, output[-3000:]
    assert record["status"] == "ok", record["error"]
    baseline = record["baseline"]
    assert baseline["cache_hit"] is False and baseline["computed"] is True
    rejected = baseline["rejected"]
    assert len(rejected) == 1 and rejected[0]["action"] == "recomputed"
    assert Path(rejected[0]["file"]).name == bad_file and why in rejected[0]["why"]
    lines = [line for line in output.splitlines() if "baseline cache entry rejected" in line]
    assert len(lines) == 1 and bad_file in lines[0] and why in lines[0]
    assert record["metrics"][METRIC]["value"] == pristine[1]["metrics"][METRIC]["value"]


def _rewrite_outputs(entry: Path, change) -> None:
    path = entry / "outputs.safetensors"
    tensors = {k: change(v) for k, v in load_file(str(path)).items()}
    save_file(tensors, str(path), metadata={"key": entry.name})


def _edit_meta(entry: Path, edit) -> None:
    path = entry / "meta.json"
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_tampered_cache_outputs_are_recomputed(app, fast, planted, pristine, tmp_path):
    """Same shape, other values: used silently before (cache_hit true, wrong metrics)."""
    _rewrite_outputs(planted, lambda t: t + 0.5)
    code, output, record = _rerun(app, fast)
    _assert_recomputed(code, output, record, pristine, "outputs.safetensors", "SHA256")
    original = load_file(str(pristine[0] / planted.name / "outputs.safetensors"))["image"]
    rewritten = load_file(str(planted / "outputs.safetensors"))["image"]
    assert rewritten.equal(original), "the entry was rewritten"
    again = _rerun(app, fast, tmp_path / "again")[2]
    assert again["baseline"]["cache_hit"] is True
    assert "rejected" not in again["baseline"], "the entry was repaired"


def test_wrong_shape_cached_output_is_recomputed_not_blamed_on_the_task(app, fast, planted,
                                                                        pristine):
    _rewrite_outputs(planted, lambda t: t[..., : t.shape[-1] // 2].contiguous())
    code, output, record = _rerun(app, fast)
    _assert_recomputed(code, output, record, pristine, "outputs.safetensors",
                       "where meta.json records")
    assert "task" not in json.dumps(record["baseline"]["rejected"])


@pytest.mark.parametrize("damage, bad_file, why", [
    (lambda e: _truncate(e / "outputs.safetensors"), "outputs.safetensors",
     "cannot be read as safetensors"),
    (lambda e: _truncate(e / "meta.json"), "meta.json", "is not valid JSON"),
    (lambda e: _edit_meta(e, lambda m: m.pop("precision")), "meta.json",
     "lacks the keys ['precision']"),
    (lambda e: _edit_meta(e, lambda m: m.pop("digests")), "meta.json",
     "written by an older ascendbench"),
], ids=["truncated-outputs", "truncated-meta", "meta-missing-keys",
        "entry-of-an-older-version-without-digest"])
def test_damaged_cache_entry_is_rejected_logged_and_recomputed(app, fast, planted, pristine, damage,
                                                               bad_file, why):
    """Before: a bare SafetensorError / JSONDecodeError / KeyError naming no file, on every later
    run (more damage cases, at the level of the cache service:
    tests/baseline/test_trusted_cache.py)."""
    damage(planted)
    code, output, record = _rerun(app, fast)
    _assert_recomputed(code, output, record, pristine, bad_file, why)


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    zombie = status.exists() and status.read_text().split(") ")[-1].startswith("Z")
    return not zombie  # a zombie is dead


@pytest.mark.slow
def test_kill_9_during_the_reference_takes_the_child_with_it(popen, fast, tmp_path, cache_dir):
    child_mode = [a for a in fast if not a.startswith("baseline.process=")]
    common = ["model=slow_tiny", *child_mode, "model.task.pause_in=reference",
              "model.task.pause_s=120", "model.task.marker=paused", "model.task.once=true"]
    proc = popen(*common, f"hydra.run.dir={tmp_path / 'a'}")
    marker = tmp_path / "paused"
    # ends on what it observes (the pause marker, or the job's exit); the bound is only a backstop,
    # generous for a loaded 2-core host where the job's imports alone can take minutes
    _wait_for(lambda: marker.exists() or proc.poll() is not None, 900,
              "the reference process to pause")
    assert marker.exists(), f"the job ended before its reference paused: {proc.communicate()[0]}"
    child = int(marker.read_text())
    assert child != proc.pid, "the pause is in the reference child process"
    requests = list(cache_dir.glob("*/request-*.json"))
    assert not requests, "the request goes over the child's stdin, not a file"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    _wait_for(lambda: not _alive(child), 120,  # a backstop: it dies within a second when idle
              f"the reference process {child} to die with its job")

    # in-process: no second child is started
    rerun = popen(*common, "baseline.process=in-process", f"hydra.run.dir={tmp_path / 'b'}")
    output, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, output[-3000:]
    assert read_record(tmp_path / "b")["baseline"]["computed"] is True


@pytest.mark.parametrize("process", ["in-process", "child"])
def test_reference_the_cache_cannot_keep_still_serves_the_job(app, fast, planted, pristine,
                                                              process):
    """A directory where outputs.safetensors goes: every cache write fails (as on a full disk).
    Before: the job failed (OutputWriteError, its cause cut to "[...]" on the console) and the
    computed reference was lost; now it is used for this job, the cache's error in the record."""
    for path in planted.iterdir():
        path.unlink()
    (planted / "outputs.safetensors" / "blocker").mkdir(parents=True)
    overrides = [o for o in fast if not o.startswith("baseline.process=")]
    code, output, job = app(*JOB, *overrides, f"baseline.process={process}")
    record = read_record(job)
    assert code == 0, output[-3000:]
    assert record["status"] == "ok", record["error"]
    assert "could not write" in record["baseline"]["not_cached"]
    assert str(planted / "outputs.safetensors") in record["baseline"]["not_cached"]
    assert record["metrics"][METRIC]["value"] == pristine[1]["metrics"][METRIC]["value"]
    assert not list(job.glob("reference-uncached*")), "the job dir keeps no copy"


def test_read_only_cache_is_a_config_error_naming_the_key(tmp_path):
    """Before: a raw FileNotFoundError (reason unexpected) naming no setting."""
    from faults.conftest import FAST

    where = "/proc/ascendbench-no-cache"  # /proc refuses new files even to root
    result = run_app([*JOB, *FAST, f"baseline.cache_dir={where}"], cwd=tmp_path)
    record = read_record(result.job_dir)
    assert result.returncode != 0 and record["error"]["reason"] == "config", record["error"]
    message = record["error"]["message"]
    assert f"baseline.cache_dir={where} cannot be written" in message
    assert "writable directory" in message and message in " ".join(result.output.split())
