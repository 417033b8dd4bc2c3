"""Hydra callbacks: the sweep summary (never raises) and the card pool (one card per worker
process)."""

from __future__ import annotations

import heapq
import json
import logging
import multiprocessing as mp
import os
import re
import sys
import threading
import time
import types

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from ascendbench import env
from ascendbench.callbacks import progress as callbacks
from ascendbench.callbacks.cards import CardPool
from ascendbench.callbacks.summary import SweepSummary
from ascendbench.devices import cards
from ascendbench.devices.cards import claim_card
from ascendbench.errors import ConfigError
from ascendbench.job.launch import LaunchRefused
from ascendbench.job.record import RecordWriter
from ascendbench.progress import format_seconds

from helpers import release_card, run_app


def _record(job_dir, status, dtype="float32", error=None):
    writer = RecordWriter(job_dir, {"seed": 42})
    writer.update(job={"model": "tiny_flux2_decoder", "device": "cpu", "dtype": dtype,
                       "preset": "mini",
                       "batch_size": 1, "height": 32, "width": 32})
    if status != "running":
        writer.finish(status, error, reason="task" if error else None)
    return writer.path


def _hydra_cfg(sweep_dir, **extra):
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}, "mode": "MULTIRUN",
                                       **extra}})


def test_summary_lists_every_job_and_a_broken_record(tmp_path, caplog):
    sweep = tmp_path / "sweep"
    _record(sweep / "dtype=float32", "ok")
    _record(sweep / "dtype=bfloat16", "failed", "bfloat16", ValueError("preset.height=31 is odd"))
    (sweep / "dtype=float16").mkdir(parents=True)
    (sweep / "dtype=float16" / "record.json").write_text("{truncated")
    callback = SweepSummary(collect_env_timeout_s=0)
    callback.on_multirun_start(_hydra_cfg(sweep))
    with caplog.at_level(logging.INFO, logger="ascendbench.callbacks"):
        callback.on_multirun_end(_hydra_cfg(sweep))
    frame = pd.read_csv(sweep / "summary.csv")
    assert sorted(frame["status"]) == ["broken", "failed", "ok"]
    summary = (sweep / "summary.md").read_text()
    assert "3 job record(s): 1 broken, 1 failed, 1 ok." in summary
    assert "ValueError: preset.height=31 is odd" in summary
    assert "[dtype=float32](dtype=float32/record.json)" in summary
    assert "(3 record(s), 2 of this run not ok)" in caplog.text


def test_the_not_ok_count_is_of_records_written_by_this_sweep(tmp_path, caplog):
    sweep = tmp_path / "sweep"
    old = _record(sweep / "old", "failed", error=ValueError("from an earlier sweep"))
    past = time.time() - 3600
    os.utime(old, (past, past))
    callback = SweepSummary(collect_env_timeout_s=0)
    callback.on_multirun_start(_hydra_cfg(sweep))
    _record(sweep / "new", "ok")
    with caplog.at_level(logging.INFO, logger="ascendbench.callbacks"):
        callback.on_multirun_end(_hydra_cfg(sweep))
    assert "(2 record(s), 0 of this run not ok)" in caplog.text
    assert len(pd.read_csv(sweep / "summary.csv")) == 2, "the summary still shows every record"


def test_summary_never_raises(tmp_path, caplog):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.ERROR, logger="ascendbench.callbacks"):
        SweepSummary().on_multirun_end(_hydra_cfg(blocker / "sweep"))
    assert "could not write the sweep summary" in caplog.text


def test_empty_sweep_summary_says_so(tmp_path):
    SweepSummary().on_multirun_end(_hydra_cfg(tmp_path / "sweep"))
    summary = (tmp_path / "sweep" / "summary.md").read_text()
    assert "No records found in this sweep directory" in summary


def test_a_sweep_gets_one_collect_env_report_beside_its_summary(tmp_path):
    SweepSummary().on_multirun_end(_hydra_cfg(tmp_path / "sweep"))
    text = (tmp_path / "sweep" / env.COLLECT_ENV_FILE).read_text()
    assert text.startswith("# torch.utils.collect_env, written by ascendbench")
    assert f"PyTorch version: {torch.__version__}" in text and "Python version:" in text
    SweepSummary(collect_env_timeout_s=0).on_multirun_end(_hydra_cfg(tmp_path / "off"))
    assert (tmp_path / "off" / "summary.md").exists()
    assert not (tmp_path / "off" / env.COLLECT_ENV_FILE).exists()


def test_a_collect_env_that_fails_or_hangs_leaves_its_reason_and_the_summary(tmp_path, monkeypatch):
    def broken():
        raise OSError("lscpu: not found")

    monkeypatch.setattr(env, "_pretty_env_info", broken)
    SweepSummary().on_multirun_end(_hydra_cfg(tmp_path / "broken"))
    broken = (tmp_path / "broken" / env.COLLECT_ENV_FILE).read_text()
    assert "no report: OSError: lscpu: not found" in broken
    release = threading.Event()
    monkeypatch.setattr(env, "_pretty_env_info", lambda: release.wait(30) and "late")
    started = time.monotonic()
    SweepSummary(collect_env_timeout_s=0.2).on_multirun_end(_hydra_cfg(tmp_path / "hung"))
    release.set()
    assert time.monotonic() - started < 10, "a hanging probe does not hold the sweep"
    hung = (tmp_path / "hung" / env.COLLECT_ENV_FILE).read_text()
    assert "no report: still running after 0.2 s (timeout)" in hung
    assert (tmp_path / "hung" / "summary.md").exists()


def _claim_in_child(cards, lock_dir, barrier, queue):
    queue.put((os.getpid(), claim_card(cards, lock_dir, wait_s=5)))
    barrier.wait(timeout=30)  # hold the card until every process has one


def test_each_process_claims_a_distinct_card(tmp_path):
    release_card()
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_claim_in_child, args=(["4", "5", "6"], tmp_path, barrier, queue))
             for _ in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert sorted(card for _, card in results) == ["4", "5", "6"]
    assert len({pid for pid, _ in results}) == 3


def test_a_process_keeps_its_card_and_a_full_pool_is_a_config_error(tmp_path):
    release_card()
    try:
        assert claim_card(["0"], tmp_path, wait_s=0) == "0"
        assert claim_card(["0", "1"], tmp_path, wait_s=0) == "0", "a process keeps its first card"
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=lambda: queue.put(_try_claim(tmp_path)))
        child.start()
        child.join(timeout=30)
        assert "no free card in the pool ['0']" in queue.get(timeout=5)
    finally:
        release_card()


def _try_claim(lock_dir):
    cards._CLAIM.clear()  # a fresh worker: the forked copy of the parent's claim is not its own
    try:
        return claim_card(["0"], lock_dir, wait_s=0.3)
    except ConfigError as exc:
        return str(exc)


def test_job_start_exports_the_card_and_notes_it(tmp_path, monkeypatch):
    release_card()
    for var in ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    cfg = _hydra_cfg(tmp_path / "sweep", runtime={"output_dir": str(job_dir)}, job={"num": 0})
    try:
        CardPool(cards="2,3").on_job_start(cfg, task_function=None)
        assert os.environ["ASCEND_RT_VISIBLE_DEVICES"] == os.environ["CUDA_VISIBLE_DEVICES"] == "2"
        note = json.loads((job_dir / "card.json").read_text())
        assert note["card"] == "2" and note["pid"] == os.getpid()
        assert (tmp_path / "sweep" / ".cards" / "card-2.lock").exists()
    finally:
        release_card()


def test_slurm_mode_copies_the_assigned_card_into_unset_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES", raising=False)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    CardPool(cards=None).on_job_start(_hydra_cfg(tmp_path, runtime={"output_dir": str(job_dir)},
                                                 job={"num": 1}),
                                      task_function=None)
    assert os.environ["ASCEND_RT_VISIBLE_DEVICES"] == "3"
    note = json.loads((job_dir / "card.json").read_text())
    assert note["exported"] == {"ASCEND_RT_VISIBLE_DEVICES": "3"}


def test_more_workers_than_cards_fails_before_any_job(tmp_path):
    with pytest.raises(LaunchRefused, match="hydra.launcher.n_jobs=4 runs 4 jobs at once"):
        CardPool(cards=[0, 1]).on_multirun_start(_hydra_cfg(tmp_path, launcher={"n_jobs": 4}))
    CardPool(cards=[0, 1]).on_multirun_start(_hydra_cfg(tmp_path, launcher={"n_jobs": 2}))
    with pytest.raises(ConfigError, match="is empty"):
        CardPool(cards=[])


# --- sweep progress: job i of N, ok/failed so far, ETA from finished jobs
# --------------------------------------


class _Clock:
    def __init__(self):
        self.now = 5000.0

    def __call__(self):
        return self.now


def _job_cfg(sweep, num, name, task=None):
    """A job's hydra node: its own overrides (``name`` and a fixed one); ``task``: the sweep's, for
    the start."""
    task = task if task is not None else [name, "device=cpu"]
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}, "mode": "MULTIRUN",
                                       "overrides": {"task": list(task)},
                                       "job": {"num": num, "override_dirname": name}}})


def test_sweep_progress_logs_job_i_of_n_the_counts_and_an_eta(tmp_path, caplog):
    from types import SimpleNamespace

    sweep, clock = tmp_path / "sweep", _Clock()
    progress = callbacks.SweepProgress(clock=clock)
    outcomes = [("dtype=float32", "ok", 10.0), ("dtype=float16", "failed", 20.0),
                ("dtype=bfloat16", "ok", 30.0)]
    with caplog.at_level("INFO", logger="ascendbench.callbacks"):
        progress.on_multirun_start(_job_cfg(sweep, 0, "",
                                            task=["dtype=float32,float16,bfloat16", "device=cpu"]))
        for num, (name, status, seconds) in enumerate(outcomes):
            cfg = _job_cfg(sweep, num, name)
            progress.on_job_start(cfg)
            clock.now += seconds
            progress.on_job_end(cfg, job_return=SimpleNamespace(return_value=status))
    lines = [m for m in caplog.messages if m.startswith("[sweep]")]
    assert lines == [
        "[sweep] 3 job(s) to run",
        "[sweep] job 1 of 3 (dtype=float32) started; 0 finished, elapsed 0.0 s",
        "[sweep] job 1 of 3 (dtype=float32) ended ok in 10.0 s; 1 finished (1 ok), elapsed 10.0 s, "
        "ETA 20.0 s",
        "[sweep] job 2 of 3 (dtype=float16) started; 1 finished (1 ok), elapsed 10.0 s, ETA 20.0 s",
        # the first job to end is left out of the time per job once another ended
        "[sweep] job 2 of 3 (dtype=float16) ended failed in 20.0 s; 2 finished (1 ok, 1 failed), "
        "elapsed 30.0 s, "
        "ETA 20.0 s",
        "[sweep] job 3 of 3 (dtype=bfloat16) started; 2 finished (1 ok, 1 failed), elapsed 30.0 s, "
        "ETA 20.0 s",
        "[sweep] job 3 of 3 (dtype=bfloat16) ended ok in 30.0 s; 3 finished (2 ok, 1 failed), "
        "elapsed 60.0 s",
    ]


@pytest.mark.parametrize("workers, durations, launch_s, exact_from", [
    (1, [10.0] * 4, 5.0, 1),  # Hydra and the launcher take 5 s before the first job starts
    (1, [30.0, 10.0, 10.0, 10.0], 0.0, 2),  # the first job pays for the reference
    (2, [10.0] * 6, 3.0, 1),  # joblib, two workers: jobs end in pairs
    (3, [12.0] * 7, 0.0, 1),
])
def test_sweep_eta_agrees_with_the_wall_clock_of_a_planted_schedule(
        tmp_path, caplog, workers, durations, launch_s, exact_from):
    """Jobs run on ``workers`` processes (one callback object each, as joblib's) at planted times;
    every ETA printed once ``exact_from`` jobs ended is the time left until the last job ends."""
    from types import SimpleNamespace

    sweep, clock = tmp_path / "sweep", _Clock()
    begin, size = clock.now, len(durations)
    callbacks.SweepProgress(clock=clock).on_multirun_start(
        _job_cfg(sweep, 0, "", task=[f"seed=range(0,{size})"]))
    free = [(begin + launch_s, w) for w in range(workers)]  # when each worker takes its next job
    events = []
    for num, seconds in enumerate(durations):
        at, worker = heapq.heappop(free)
        events += [(at, 1, num, worker), (at + seconds, 0, num, worker)]  # an end before a start
        heapq.heappush(free, (at + seconds, worker))
    last_end = max(at for at, *_ in events)
    objects = [callbacks.SweepProgress(clock=clock) for _ in range(workers)]
    checked = []
    with caplog.at_level("INFO", logger="ascendbench.callbacks"):
        for at, starts, num, worker in sorted(events):
            clock.now = at
            cfg = _job_cfg(sweep, num, f"seed={num}")
            if starts:
                objects[worker].on_job_start(cfg)
            else:
                objects[worker].on_job_end(cfg, SimpleNamespace(return_value="ok"))
            line = caplog.messages[-1]
            finished = int(re.search(r"; (\d+) finished", line).group(1))
            if exact_from <= finished < size:
                checked.append((line.rsplit("ETA ", 1)[-1], format_seconds(last_end - at)))
    assert len(checked) >= size - exact_from
    assert all(printed == left for printed, left in checked), checked


def test_sweep_progress_counts_the_params_of_a_sweep_file(tmp_path, caplog):
    """``+sweep=attention_backends`` sweeps through ``hydra.sweeper.params``: 2 jobs, not "job 2 of
    1"."""
    cfg = _job_cfg(tmp_path / "sweep", 0, "", task=["+sweep=attention_backends", "seed=1,2"])
    cfg.hydra.sweeper = {"params": {"model.patches.0.backend": "_native_npu,native", "seed": "7"}}
    with caplog.at_level("INFO", logger="ascendbench.callbacks"):
        callbacks.SweepProgress().on_multirun_start(cfg)
    # params x the command line's seed=1,2 (which wins)
    assert "[sweep] 4 job(s) to run" in caplog.messages


def test_sweep_progress_is_shared_by_worker_processes_through_the_sweep_dir(tmp_path, caplog):
    """Each joblib worker has its own callback object: the counts come from the files in the sweep
    dir."""
    from types import SimpleNamespace

    sweep, clock = tmp_path / "sweep", _Clock()
    start = _job_cfg(sweep, 0, "", task=("seed=range(0,4)", "preset=mini"))
    callbacks.SweepProgress(clock=clock).on_multirun_start(start)
    worker_a, worker_b = callbacks.SweepProgress(clock=clock), callbacks.SweepProgress(clock=clock)
    worker_a.on_job_start(_job_cfg(sweep, 0, "seed=0"))
    worker_b.on_job_start(_job_cfg(sweep, 1, "seed=1"))
    clock.now += 8.0
    worker_a.on_job_end(_job_cfg(sweep, 0, "seed=0"), SimpleNamespace(return_value="ok"))
    with caplog.at_level("INFO", logger="ascendbench.callbacks"):
        worker_b.on_job_end(_job_cfg(sweep, 1, "seed=1"),
                            SimpleNamespace(return_value="verdict FAIL"))
    assert caplog.messages[-1] == ("[sweep] job 2 of 4 (seed=1) ended verdict FAIL in 8.0 s; "
                                   "2 finished (1 ok, 1 verdict FAIL), elapsed 8.0 s, ETA 8.0 s")


def test_sweep_progress_stays_silent_in_a_single_run_and_never_raises(tmp_path, caplog):
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "nowhere")}, "mode": "RUN",
                                      "job": {"num": 0, "override_dirname": ""}}})
    with caplog.at_level("INFO", logger="ascendbench.callbacks"):
        callbacks.SweepProgress().on_job_start(cfg)
        callbacks.SweepProgress().on_job_end(cfg, job_return=None)
    assert not [m for m in caplog.messages if m.startswith("[sweep]")]
    unreadable = _job_cfg(tmp_path / "sweep", 0, "x")
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / callbacks.SWEEP_EVENTS).write_text("{not json")
    callbacks.SweepProgress().on_job_start(unreadable)  # logged at debug level, no exception


def test_sweep_size_of_grid_sweeps():
    assert callbacks.sweep_shape(["dtype=float32,float16", "preset=mini,balanced,quality",
                                  "seed=1"]) == (6, ["dtype", "preset"])
    assert callbacks.sweep_shape(["seed=range(0,5)"]) == (5, ["seed"])
    assert callbacks.sweep_shape([]) == (1, [])
    assert callbacks.sweep_shape(["dtype=float32,float16", "seed=1", "+x=a,b"])[1] == ["dtype", "x"]
    assert callbacks.sweep_shape(["lr=interval(0,1)"]) == (None, ["lr"])  # optuna's: not sized


def test_the_sweep_summary_says_why_each_timed_loop_stopped_and_how_precise_it_was(tmp_path):
    sweep = tmp_path / "sweep"
    for dtype, stop in (("float32",
                         {"reason": "precision", "ci_rel_half_width": 0.0081, "precision": 0.01}),
                        ("float16",
                         {"reason": "max_time_s", "ci_rel_half_width": 0.042, "precision": 0.01})):
        writer = RecordWriter(sweep / f"dtype={dtype}", {"seed": 42})
        writer.update(job={"model": "tiny_flux2_decoder", "device": "cpu", "dtype": dtype,
                           "preset": "mini"},
                      bench={"latency": {"median_ms": 3.0}, "stop": stop})
        writer.finish("ok")
    SweepSummary().on_multirun_end(_hydra_cfg(sweep))
    summary = (sweep / "summary.md").read_text()
    assert "| stop |" in summary
    assert "precision, CI +-0.8% (target 1%)" in summary
    assert "max_time_s, CI +-4.2% (target 1%)" in summary
    frame = pd.read_csv(sweep / "summary.csv")
    assert sorted(frame["bench.stop.reason"]) == ["max_time_s", "precision"]


def test_a_sweep_with_two_workers_on_one_card_is_refused_before_any_job(tmp_path):
    """Hydra turns a callback's exception into a warning: the refusal must still stop the launch
    (exit 1)."""
    sweep = tmp_path / "sweep"
    result = run_app(["-m", "hydra/launcher=joblib_cards", "hydra.launcher.n_jobs=2",
                      "hydra.callbacks.cards.cards=[0]",
                      "model=tiny_flux2_decoder", "device=cpu", "seed=1,2"], cwd=tmp_path,
                      out_dir=sweep)
    assert result.returncode == 1
    assert "the card pool hydra.callbacks.cards.cards=['0'] has 1 card(s)" in result.stderr
    assert not list(sweep.rglob("record.json"))


def test_with_torch_npu_in_use_its_own_collect_env_reports_cann(tmp_path, monkeypatch):
    """torch_npu.utils.collect_env.get_pretty_env_info (every wheel 2.1.0.post17 .. 2.14.0, e.g.
    2.9.0 utils/collect_env.py:212) adds the CANN version to torch's report."""
    npu_env = types.ModuleType("torch_npu.utils.collect_env")
    npu_env.get_pretty_env_info = lambda: "PyTorch version: x\nCANN: 8.1.RC1"
    for name in ("torch_npu", "torch_npu.utils"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch_npu.utils.collect_env", npu_env)
    SweepSummary().on_multirun_end(_hydra_cfg(tmp_path / "sweep"))
    text = (tmp_path / "sweep" / env.COLLECT_ENV_FILE).read_text()
    assert text.startswith("# torch_npu.utils.collect_env, written by") and "CANN: 8.1.RC1" in text
