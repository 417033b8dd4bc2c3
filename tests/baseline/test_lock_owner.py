"""A job waiting on another job's baseline lock says who holds it (pid, host, since when) and keeps
a heartbeat line at most every 15 s; the timeout names the holder. A fake clock stands in for the
hour."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading

import pytest

from ascendbench.baseline.store import BaselineStore, LockClock, describe_holder
from ascendbench.errors import BaselineError

KEY = "k" * 32


class FakeClock:
    """Each reading moves time on by ``step`` seconds; ``readings`` keeps them."""

    def __init__(self, step: float) -> None:
        self.step, self.t, self.readings = step, 0.0, []

    def __call__(self) -> float:
        self.t += self.step
        self.readings.append(self.t)
        return self.t


def _waiting_lines(caplog) -> list[str]:
    messages = [r.getMessage() for r in caplog.records]
    return [m for m in messages if m.startswith("waiting for the baseline lock")]


def test_the_holder_writes_who_it_is_beside_the_lock_and_removes_it_after(tmp_path):
    store = BaselineStore(tmp_path)
    with store.lock(KEY, 5, {"job": "/jobs/a"}) as wait:
        owner = json.loads(store.owner_file(KEY).read_text())
        mine = (os.getpid(), socket.gethostname(), "/jobs/a")
        assert (owner["pid"], owner["host"], owner["job"]) == mine
        assert owner["since"].endswith("Z") and wait.holder is None and wait.seconds >= 0
    assert not store.owner_file(KEY).exists()


def test_a_waiting_job_names_the_holder_and_heartbeats_at_most_every_15_s(tmp_path, caplog):
    holder = BaselineStore(tmp_path)
    clock = FakeClock(step=4.0)  # every poll of the lock "takes" 4 s
    waiter = BaselineStore(tmp_path, LockClock(now=clock, poll_s=0.005))
    with holder.lock(KEY, 5, {"job": "/jobs/holder"}), \
            caplog.at_level(logging.INFO, logger="ascendbench.baseline"):
        with pytest.raises(BaselineError) as err:
            with waiter.lock(KEY, 120):
                pass
    lines = _waiting_lines(caplog)
    assert f"pid {os.getpid()} on host {socket.gethostname()} since " in lines[0]
    assert "job /jobs/holder" in lines[0]
    assert 120 / 15 <= len(lines) <= 120 / 15 + 1, lines  # the first at once, then one per 15 s
    times = [float(line.split("waited ")[1].split(" s")[0]) for line in lines]
    assert all(b - a >= 15 for a, b in zip(times, times[1:], strict=False)), times
    message = str(err.value)
    assert f"pid {os.getpid()}" in message and "baseline.lock_timeout_s=120" in message
    assert str(tmp_path / f"{KEY}.lock") in message


def test_a_job_that_waited_records_who_held_the_lock(tmp_path):
    holder = BaselineStore(tmp_path)
    waiter = BaselineStore(tmp_path, LockClock(poll_s=0.01))
    got = threading.Event()
    release = threading.Event()

    def hold():
        with holder.lock(KEY, 5, {"job": "/jobs/holder"}):
            got.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    got.wait(5)
    timer = threading.Timer(0.2, release.set)
    timer.start()
    with waiter.lock(KEY, 10) as wait:
        assert wait.seconds > 0.1 and wait.holder["job"] == "/jobs/holder"
    thread.join()


def test_an_unknown_holder_is_said_to_be_unknown():
    assert "unknown process" in describe_holder(None)
    assert "unknown process" in describe_holder({})
