"""Fixtures of the fault-injection suite: the CLI run in this process or in a subprocess, with the
seams of ``seams.py`` reachable through ``hydra.searchpath`` and fast, offline job settings."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra

HERE = Path(__file__).resolve().parent
SEARCHPATH = f"hydra.searchpath=[file://{HERE / 'conf'}]"
# Tiny, quick and self-contained: CPU, 32 px, two timed calls, the reference in-process.
FAST = ["device=cpu", "preset.height=32", "preset.width=32", "preset.warmup=0", "preset.iters=2",
        "bench.flops.enabled=false", "baseline.process=in-process"]


def read_record(job_dir: Path) -> dict:
    """The job's record.json (it must parse: records are written atomically)."""
    return json.loads((Path(job_dir) / "record.json").read_text())


def subprocess_env() -> dict:
    """Offline, unbuffered, with ``seams`` importable."""
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}


def cli_command(*args: str) -> list[str]:
    """``python -m ascendbench ARGS`` with the seams' search path."""
    return [sys.executable, "-m", "ascendbench", *args, SEARCHPATH]


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
def app(tmp_path, cache_dir, monkeypatch, capsys):
    """``app(*overrides, multirun=False)`` runs ``python -m ascendbench`` in this process.

    Returns ``(exit code, console text, output dir)``; Hydra's logging is undone afterwards.
    """
    from huggingface_hub import constants

    from ascendbench import callbacks, cli

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.syspath_prepend(str(HERE))
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)

    def run(*overrides: str, multirun: bool = False, out_dir: Path | None = None):
        out_dir = out_dir or tmp_path / ("sweep" if multirun else "job")
        where = f"hydra.sweep.dir={out_dir}" if multirun else f"hydra.run.dir={out_dir}"
        argv = ["ascendbench", *(["-m"] if multirun else []), *overrides, f"baseline.cache_dir={cache_dir}",
                where, SEARCHPATH]
        monkeypatch.setattr(sys, "argv", argv)
        # cli.main() also counts the statuses of "the last multirun of this process"; a multirun run
        # by an earlier test in this pytest process must not count for this run.
        monkeypatch.setitem(callbacks._LAST_MULTIRUN, "statuses", [])
        GlobalHydra.instance().clear()
        code = 0
        try:
            cli.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            GlobalHydra.instance().clear()
            _restore_logging(root, *saved)
        captured = capsys.readouterr()
        return code, captured.out + captured.err, out_dir

    yield run


def _restore_logging(root: logging.Logger, handlers: list, level: int) -> None:
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)


@pytest.fixture
def run_subprocess(tmp_path, cache_dir):
    """``run_subprocess(*args)`` runs the CLI in a child process to completion; returns CompletedProcess."""

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(cli_command(*args, f"baseline.cache_dir={cache_dir}"), cwd=tmp_path,
                              env=subprocess_env(), capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture
def popen(tmp_path, cache_dir):
    """``popen(*args)`` starts the CLI in a child process (cwd ``tmp_path``, output captured) and
    kills whatever is still running at the end of the test."""
    started: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen(cli_command(*args, f"baseline.cache_dir={cache_dir}"), cwd=tmp_path,
                                env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
