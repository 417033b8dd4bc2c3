"""The reference process dies with its job (kill -9 of the job must not leave it running), and a
reference process killed by a signal is reported as such."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
from hydra.utils import instantiate

from ascendbench.baseline import process
from ascendbench.baseline.__main__ import PARENT_PID_ENV, watch_parent
from ascendbench.baseline.service import ReferenceQuery, get_or_compute
from ascendbench.errors import BaselineError
from ascendbench.job.failures import console_paragraph
from ascendbench.tasks.inputs import describe

from helpers import TINY_RUN, build_tiny_flux2

# A "job" starting two reference-like children, one holding the lifeline; prints their pids.
JOB = """
import os, subprocess, sys, time
child = ("from ascendbench.baseline.__main__ import hold_lifeline; import sys, time; "
         "print(hold_lifeline(), flush=True); time.sleep(60)")
tied = subprocess.Popen([sys.executable, "-c", child], env={**os.environ, "%s": str(os.getpid())},
                        stdout=subprocess.PIPE, text=True)
free = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(tied.pid, free.pid, tied.stdout.readline().strip(), flush=True)
time.sleep(60)
""" % PARENT_PID_ENV


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = f"/proc/{pid}/stat"
    return not (os.path.exists(stat) and open(stat).read().rsplit(") ", 1)[-1].startswith("Z"))


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_kill_9_of_the_job_takes_the_reference_process_with_it():
    job = subprocess.Popen([sys.executable, "-c", JOB], stdout=subprocess.PIPE, text=True)
    tied, free, how = job.stdout.readline().split()
    tied, free = int(tied), int(free)
    try:
        assert how == "pdeathsig"
        job.send_signal(signal.SIGKILL)
        job.wait(10)
        assert _gone_within(tied, 5), "the reference process outlived its killed job"
        assert _alive(free), "control: a child without the lifeline survives its parent's kill -9"
    finally:
        for pid in (tied, free):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_parent_watch_ends_an_orphan_where_there_is_no_death_signal():
    parents = iter([100, 100, 1])  # re-parented to init on the third look
    orphaned = threading.Event()
    watch_parent(100, getppid=lambda: next(parents, 1), interval_s=0.01, on_orphaned=orphaned.set)
    assert orphaned.wait(2)


def test_a_reference_process_whose_job_is_already_gone_exits_at_once():
    code = (f"from ascendbench.baseline.__main__ import hold_lifeline; "
            f"hold_lifeline({{'{PARENT_PID_ENV}': '{os.getpid() + 10_000_000}'}})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "is gone" in done.stderr


# Touches N MB (more than this test process's peak: surely the child's own), then dies by SIGKILL.
SELF_KILL = ("import os, signal; block = bytearray({mb} << 20); "
             "block[::4096] = b'x' * len(block[::4096]); os.kill(os.getpid(), signal.SIGKILL)")


@pytest.fixture
def child_query(compose_cfg, tmp_path):
    cfg = compose_cfg(["model=tiny_flux2_decoder", *TINY_RUN,
                       f"baseline.cache_dir={tmp_path / 'cache'}"])
    task = instantiate(cfg.model.task)
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    weights = {"kind": "random-init", "init_seed": 42}
    return ReferenceQuery(cfg, task, inputs, torch.float64, weights, describe(inputs),
                          build_tiny_flux2(), tmp_path / "job")


def _replace_child(monkeypatch, script: str) -> None:
    real = subprocess.Popen
    monkeypatch.setattr(process.subprocess, "Popen",
                        lambda cmd, **kw: real([sys.executable, "-c", script], **kw))


def test_a_reference_process_killed_by_a_signal_is_reported_as_such(child_query, monkeypatch,
                                                                     tmp_path):
    mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 + 300
    _replace_child(monkeypatch, SELF_KILL.format(mb=mb))
    with pytest.raises(BaselineError) as err:
        get_or_compute(child_query)
    message = str(err.value)
    assert "was killed by SIGKILL, possibly the out-of-memory killer" in message
    assert "the reference needed about " in message and "B (estimate)" in message
    reached = float(message.split("had reached ")[1].split(" GB")[0])
    assert mb * 1.048e-3 - 0.1 <= reached <= mb * 1.048e-3 + 0.3 and "Its log is empty" in message
    assert "Last lines" not in message
    assert not list((tmp_path / "cache").glob("*/request-*.json")), "no request file is written"


def test_a_reference_process_that_exits_with_an_error_keeps_its_log_lines(child_query, monkeypatch):
    boom = "boom: the model class is missing"
    _replace_child(monkeypatch, f"import sys; print('{boom}'); sys.exit(1)")
    with pytest.raises(BaselineError, match=f"(?s)exited with status 1.*{boom}"):
        get_or_compute(child_query)


def test_a_reference_process_error_is_shown_whole_after_a_long_log(child_query, monkeypatch):
    """Before: the child's error came after 25 log lines, cut off by the console's "[...]"."""
    cause = "OutputWriteError: could not write " + "/very/long/path" * 20 + "; free space there."
    script = f"for i in range(30): print('log line ' * 12)\nprint('{cause}')\nraise SystemExit(2)"
    _replace_child(monkeypatch, script)
    with pytest.raises(BaselineError) as err:
        get_or_compute(child_query)
    assert cause in console_paragraph(err.value) and "[...]" not in console_paragraph(err.value)
