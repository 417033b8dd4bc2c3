"""Fixtures of the fault-injection suite: the CLI run in this process (``app``) or started in a
subprocess (``popen``, for signals and kills), with the seams of ``seams.py`` reachable through
``hydra.searchpath`` and fast, offline job settings."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import read_record, run_app
from helpers.app import BASE_ENV

HERE = Path(__file__).resolve().parent
if (
    str(HERE) not in sys.path
):  # `seams` / `nonfinite_seams` importable by a test that runs before any `app`
    sys.path.insert(0, str(HERE))
SEARCHPATH = f"hydra.searchpath=[file://{HERE / 'conf'}]"
# Tiny, quick and self-contained: CPU, 32 px, two timed calls, the reference in-process.
FAST = [
    "device=cpu",
    "preset.height=32",
    "preset.width=32",
    "preset.warmup=0",
    "preset.iters=2",
    "bench.flops.enabled=false",
    "baseline.process=in-process",
]


def _pythonpath() -> str:
    """``PYTHONPATH`` with this directory first: ``seams`` importable by the job."""
    return os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])


def subprocess_env() -> dict:
    """Offline, unbuffered, with ``seams`` importable."""
    return {**os.environ, **BASE_ENV, "PYTHONPATH": _pythonpath()}


def cli_command(*args: str) -> list[str]:
    """``python -m ascendbench ARGS`` with the seams' search path."""
    return [sys.executable, "-m", "ascendbench", *args, SEARCHPATH]


def _default_sigint() -> None:
    """In the child before exec: SIGINT handled by default, so that Python turns it into
    KeyboardInterrupt even when pytest itself runs where SIGINT is ignored (a background job of a
    non-interactive shell)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def fast() -> list[str]:
    """Overrides that make a tiny job take about a second (see FAST)."""
    return list(FAST)


@pytest.fixture
def record_of():
    """``record_of(job_dir)``: the parsed record.json."""
    return read_record


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    """A private baseline cache for the test."""
    return tmp_path / "baseline-cache"


@pytest.fixture
def app(tmp_path, cache_dir, monkeypatch):
    """``app(*overrides, multirun=False, out_dir=None)`` runs ``python -m ascendbench`` in this
    process (``helpers.run_app``: the real entry point, cwd ``tmp_path``, process state restored
    afterwards).

    Returns ``(exit code, console text, output dir)``; the output dir defaults to ``<tmp>/job``
    (``<tmp>/sweep`` for a multirun).
    """
    monkeypatch.syspath_prepend(str(HERE))  # the tests import `seams` too

    def run(*overrides: str, multirun: bool = False, out_dir: Path | None = None):
        args = [
            *(["-m"] if multirun else []),
            *overrides,
            f"baseline.cache_dir={cache_dir}",
            SEARCHPATH,
        ]
        result = run_app(args, cwd=tmp_path, env={"PYTHONPATH": _pythonpath()}, out_dir=out_dir)
        return result.returncode, result.output, result.job_dir

    return run


@pytest.fixture
def popen(tmp_path, cache_dir):
    """``popen(*args)`` starts the CLI in a child process (cwd ``tmp_path``, output captured) and
    kills whatever is still running at the end of the test."""
    started: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            cli_command(*args, f"baseline.cache_dir={cache_dir}"),
            cwd=tmp_path,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_default_sigint,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
