"""Faults of the process itself, on the real CLI in subprocesses: Ctrl-C, kill -9 then rerun,
two jobs racing for one baseline."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from filelock import FileLock

from helpers import read_record

SLOW = "model=slow_tiny"
pytestmark = pytest.mark.slow


def _wait_for(
    condition, timeout: float = 300.0, what: str = "condition"
) -> None:  # generous: a loaded host
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _jobs_by_seed(sweep: Path) -> dict[str, Path]:
    """Sweep job dirs (named by their overrides) keyed by the value of their ``seed=`` override."""
    found = (re.search(r"(?:^|,)seed=(\d+)", d.name) for d in sweep.iterdir() if d.is_dir())
    return {m.group(1): sweep / m.string for m in found if m}


def _all_json_parses(*roots: Path) -> int:
    count = 0
    for root in roots:
        for path in root.rglob("*.json"):
            json.loads(path.read_text())  # a truncated file raises here
            count += 1
    return count


def _ended_output(procs: dict[str, subprocess.Popen]) -> str:
    """The last lines of each process's output, after ending those still running."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
    return "\n".join(f"{name}: {proc.communicate()[0][-3000:]}" for name, proc in procs.items())


# a signal whose handler runs inside a finalizer (`__del__`, run by the collector at any moment):
# Python prints what the handler raised there and drops it, and the job went on
IN_FINALIZER = ["model.task.in_finalizer=true"]


@pytest.mark.parametrize("where", [[], IN_FINALIZER], ids=["in-code", "in-a-finalizer"])
def test_ctrl_c_leaves_an_interrupted_record(popen, fast, tmp_path, where):
    job = tmp_path / "job"
    proc = popen(SLOW, *fast, "model.task.pause_s=120", "model.task.marker=paused",
                 f"hydra.run.dir={job}", *where)
    _wait_for(
        lambda: (tmp_path / "paused").exists() or proc.poll() is not None, what="the device run"
    )
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    record = read_record(job)
    assert record["status"] == "interrupted" and record["error"]["reason"] == "interrupted"
    message = record["error"]["message"]
    assert "during the device run" in message and "run the same command again" in message
    assert "job interrupted; record (status interrupted)" in output


@pytest.mark.parametrize("sent, where", [(signal.SIGTERM, []), (signal.SIGHUP, []),
                                         (signal.SIGTERM, IN_FINALIZER)],
                         ids=["SIGTERM", "SIGHUP", "SIGTERM-in-a-finalizer"])
def test_sigterm_and_sighup_also_leave_an_interrupted_record(popen, fast, tmp_path, sent, where):
    """SIGHUP: the terminal of a run in the foreground closed (an ssh session lost)."""
    job = tmp_path / "job"
    proc = popen(SLOW, *fast, "model.task.pause_s=120", "model.task.marker=paused",
                 f"hydra.run.dir={job}", *where)
    _wait_for(
        lambda: (tmp_path / "paused").exists() or proc.poll() is not None, what="the device run"
    )
    proc.send_signal(sent)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130
    record = read_record(job)
    assert record["status"] == "interrupted"
    assert f"interrupted (signal {sent.name}) during the device run" in record["error"]["message"]
    assert "SIGINT" not in record["error"]["message"] and "Ctrl-C" not in output
    assert f"interrupted (signal {sent.name})" in output


def test_kill_9_mid_sweep_then_rerun_keeps_finished_jobs(popen, fast, tmp_path, cache_dir):
    sweep = tmp_path / "sweep"
    args = [
        "-m",
        SLOW,
        *fast,
        "seed=1,2,3",
        "model.task.pause_s=120",
        "model.task.pause_seed=2",
        "model.task.marker=paused",
        "model.task.once=true",
        f"hydra.sweep.dir={sweep}",
    ]
    proc = popen(*args)
    _wait_for(
        lambda: (tmp_path / "paused").exists() or proc.poll() is not None,
        what="job seed=2 to start",
    )
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    jobs = _jobs_by_seed(sweep)
    assert read_record(jobs["1"])["status"] == "ok"
    assert read_record(jobs["2"])["status"] == "running", "a killed job never looks ok"
    assert "3" not in jobs or not (jobs["3"] / "record.json").exists()
    assert _all_json_parses(sweep, cache_dir) >= 2
    finished = (jobs["1"] / "record.json").read_bytes()

    rerun = popen(*args)
    output, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, output[-3000:]
    jobs = _jobs_by_seed(sweep)
    assert (jobs["1"] / "record.json").read_bytes() == finished, (
        "the finished job was kept, not rerun"
    )
    assert [read_record(jobs[s])["status"] for s in ("1", "2", "3")] == ["ok", "ok", "ok"]
    _all_json_parses(sweep, cache_dir)


def test_two_jobs_racing_for_one_baseline_compute_it_once(popen, fast, tmp_path, cache_dir):
    common = [
        SLOW,
        *fast,
        "model.task.pause_in=reference",
        "model.task.pause_s=120",
        "model.task.marker=paused",
        "model.task.once=true",
        "model.task.release=release",
        "model.task.count_file=computed",
    ]
    procs = {
        name: popen(*common, f"hydra.run.dir={tmp_path / name}") for name in ("a", "b")
    }  # started together
    marker = tmp_path / "paused"
    _wait_for(
        lambda: marker.exists() or any(p.poll() is not None for p in procs.values()),
        what="one job to hold the baseline lock and compute the reference",
    )
    holder = next(
        (
            name
            for name, proc in procs.items()
            if marker.exists() and marker.read_text() == str(proc.pid)
        ),
        None,
    )
    assert holder, f"no job paused in its reference: {_ended_output(procs)}"
    waiter = "b" if holder == "a" else "a"
    record_w = tmp_path / waiter / "record.json"
    _wait_for(
        lambda: (
            (record_w.exists() and "resources" in json.loads(record_w.read_text() or "{}"))
            or procs[waiter].poll() is not None
        ),
        what=f"job {waiter} to reach the baseline lock",
    )
    time.sleep(1.0)  # the waiter now waits on the lock the holder holds
    (tmp_path / "release").touch()
    for proc in procs.values():
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output[-3000:]
    computed, reused = read_record(tmp_path / holder), read_record(tmp_path / waiter)
    assert computed["status"] == reused["status"] == "ok"
    assert (tmp_path / "computed").read_text().count("\n") == 1, (
        "the reference was computed exactly once"
    )
    assert (computed["baseline"]["cache_hit"], reused["baseline"]["cache_hit"]) == (False, True)
    assert (
        reused["baseline"]["waited_s"] > 0.5
        and computed["baseline"]["cache_key"] == reused["baseline"]["cache_key"]
    )
    assert (
        computed["metrics"]["mean_rel_err"]["value"] == reused["metrics"]["mean_rel_err"]["value"]
    )


# one worker's job takes 3 s to end once interrupted; the other's ended at once, and its worker with
# it, which made joblib kill the slow worker before its record said `interrupted`
SLOW_TO_END = ["model.task.cleanup_s=3", "model.task.cleanup_seed=1"]


@pytest.mark.parametrize("sent, where", [(signal.SIGTERM, []), (signal.SIGKILL, []),
                                         (signal.SIGTERM, IN_FINALIZER),
                                         (signal.SIGTERM, SLOW_TO_END)],
                         ids=["SIGTERM", "SIGKILL", "SIGTERM-in-a-finalizer",
                              "SIGTERM-slow-to-end"])
def test_a_signalled_joblib_launcher_leaves_interrupted_records_and_no_worker(popen, fast,
                                                                             tmp_path, sent, where):
    """SIGTERM: the launcher passes it to its workers and waits for their records before joblib
    kills them (a worker whose record is final waits for that, so that joblib does not kill the
    others early); SIGKILL: the workers follow their launcher (PR_SET_PDEATHSIG), record
    `interrupted` and end, so no orphan keeps running or holds its card lock."""
    sweep = tmp_path / "sweep"
    proc = popen("-m", SLOW, *fast, "model.task.pause_s=120", f"model.task.marker={tmp_path}/p",
                 "seed=1,2", "hydra/launcher=joblib_cards", "hydra.launcher.n_jobs=2",
                 "hydra.callbacks.cards.cards=[0,1]", f"hydra.sweep.dir={sweep}", *where)

    def records() -> list[str]:
        return [json.loads(p.read_text())["status"] for p in sweep.glob("*/record.json")]

    # both jobs started (a worker that has not reached its job when the launcher dies ends
    # without a record: nothing of it ran), one of them paused in its device run
    _wait_for(lambda: (tmp_path / "p").exists() and len(records()) == 2
              or proc.poll() is not None, what="two started jobs, one paused")
    worker = int((tmp_path / "p").read_text())
    proc.send_signal(sent)
    output, _ = proc.communicate(timeout=120)

    deadline = time.monotonic() + (300 if sent == signal.SIGTERM else 30)  # backstops
    while "running" in records() and time.monotonic() < deadline:
        time.sleep(0.1)
    # SIGKILL: one SIGTERM per launcher thread that dies; the second must not cut the first's
    # `interrupted` record short (it did under load)
    assert records() == ["interrupted"] * 2, (records(), output[-3000:])
    _wait_for(lambda: not Path(f"/proc/{worker}").exists(), what=f"worker {worker} to end")
    for lock in (sweep / ".cards").glob("card-*.lock"):
        FileLock(str(lock)).acquire(timeout=0)  # free: its worker is gone


def test_a_signalled_joblib_launcher_with_an_idle_worker(popen, fast, tmp_path):
    """A worker between jobs (its job done, none left) ends on the launcher's SIGTERM without
    making joblib kill the worker whose job is still ending (3 s) before its record is final."""
    sweep = tmp_path / "sweep"
    proc = popen("-m", SLOW, *fast, "model.task.pause_s=120", "model.task.pause_seed=1",
                 f"model.task.marker={tmp_path}/p", *SLOW_TO_END, "seed=1,2",
                 "hydra/launcher=joblib_cards", "hydra.launcher.n_jobs=2",
                 "hydra.callbacks.cards.cards=[0,1]", f"hydra.sweep.dir={sweep}")

    def records() -> dict[str, str]:
        return {seed: json.loads((path / "record.json").read_text())["status"]
                for seed, path in _jobs_by_seed(sweep).items() if (path / "record.json").exists()}

    _wait_for(lambda: (tmp_path / "p").exists() and records().get("2") == "ok"
              or proc.poll() is not None, what="job seed=1 paused, job seed=2 done")
    time.sleep(1.0)  # the worker of seed=2 back in joblib's loop, waiting for a job
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output[-3000:]
    assert records() == {"1": "interrupted", "2": "ok"}, (records(), output[-3000:])
    for lock in (sweep / ".cards").glob("card-*.lock"):
        _wait_for(lambda lock=lock: _free(lock), what=f"{lock.name} to be free")


def _free(lock: Path) -> bool:
    try:
        FileLock(str(lock)).acquire(timeout=0).lock.release()
    except TimeoutError:
        return False
    return True
