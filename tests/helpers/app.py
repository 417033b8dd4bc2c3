"""``python -m ascendbench ARGS`` run by a test: in this process (``run_app``) or in a subprocess
(``run_cli``).

Both return the same :class:`Result`, so a test reads the same whichever way it ran. ``run_app``
calls the real entry point :func:`ascendbench.cli.main` with ``sys.argv`` set: Hydra's command-line
parsing and composition, the app, the console paragraph and the exit code are the CLI's own; only
the interpreter start (torch, diffusers: seconds per run) is saved. Everything a run changes in the
process is put back afterwards: ``sys.argv``, ``sys.path``, the working directory, the environment,
signal handlers, logging, Hydra's global state and torch's global switches.

Keep ``run_cli`` for what one process cannot show: signals, environment variables read before torch
initialises, launchers that start processes, an installed copy of the package.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import os
import signal
import subprocess
import sys
from contextlib import ExitStack, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping

import torch
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig

# Overrides that make a job of the tiny model take about a second.
TINY_RUN = ["preset.height=32", "preset.width=32", "preset.warmup=0", "preset.iters=2",
            "device=cpu"]
# What every run of the CLI by a test has: no hub access, unbuffered output.
BASE_ENV = {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
MULTIRUN_FLAGS = ("-m", "--multirun")


@dataclass
class Result:
    """The outcome of one run of the CLI.

    Attributes:
        returncode: the process exit status (``SystemExit``'s code in this process).
        stdout: what was written to standard output (the console log lines, the summary).
        stderr: what was written to standard error (Hydra's errors, the one-paragraph messages).
        job_dir: ``hydra.run.dir`` of a single run, ``hydra.sweep.dir`` of a multirun.
    """

    returncode: int
    stdout: str
    stderr: str
    job_dir: Path

    @property
    def output(self) -> str:
        """Standard output then standard error: the console as a user sees it."""
        return self.stdout + self.stderr


def read_record(job_dir: Path) -> dict:
    """The job's ``record.json`` (it must parse: records are written atomically)."""
    return json.loads((Path(job_dir) / "record.json").read_text())


def run_app(args: Iterable[str], cwd: Path, env: Mapping[str, str] | None = None,
            out_dir: Path | None = None) -> Result:
    """Run ``python -m ascendbench ARGS`` in this process, in ``cwd``, offline; see the module
    docstring.

    Args:
        args: the command line after ``python -m ascendbench`` (``-m`` for a multirun). cwd: working
        directory of the run. env: extra environment variables for the run; ``PYTHONPATH`` entries
        are also put on ``sys.path``. out_dir: job dir (sweep dir with ``-m``); default ``cwd/job``
        (``cwd/sweep``), unless ``args``
            already sets ``hydra.run.dir`` / ``hydra.sweep.dir``.
    """
    args, out_dir = _with_out_dir(list(args), Path(cwd), out_dir)
    stdout, stderr = io.StringIO(), io.StringIO()
    # The redirection comes first: Hydra's logging handlers bind sys.stdout when they are
    # configured.
    with _process_state(Path(cwd),
                        {**BASE_ENV,
                         **(env or {})}), redirect_stdout(stdout), redirect_stderr(stderr):
        returncode = _call_main(["ascendbench", *args])
    return Result(returncode, stdout.getvalue(), stderr.getvalue(), out_dir)


def run_cli(args: Iterable[str], cwd: Path, env: Mapping[str, str] | None = None,
            out_dir: Path | None = None,
            timeout: float = 600) -> Result:
    """Run ``python -m ascendbench ARGS`` in a subprocess, in ``cwd``, offline (arguments as
    :func:`run_app`)."""
    args, out_dir = _with_out_dir(list(args), Path(cwd), out_dir)
    full_env = {**os.environ, **BASE_ENV, **(env or {})}
    done = subprocess.run([sys.executable, "-m", "ascendbench", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr, out_dir)


def _with_out_dir(args: list[str], cwd: Path, out_dir: Path | None) -> tuple[list[str], Path]:
    """``args`` with the output directory set, and that directory."""
    key = "hydra.sweep.dir" if any(a in MULTIRUN_FLAGS for a in args) else "hydra.run.dir"
    given = [a.split("=", 1)[1] for a in args if a.startswith(f"{key}=")]
    if given:
        return args, Path(given[-1])
    out_dir = out_dir or cwd / ("sweep" if key == "hydra.sweep.dir" else "job")
    return [*args, f"{key}={out_dir}"], out_dir


def _call_main(argv: list[str]) -> int:
    """``ascendbench.cli.main()`` with ``argv``; the exit status it would give the shell."""
    from ascendbench import cli

    sys.argv = argv
    try:
        cli.main()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)  # what the interpreter does with sys.exit("message")
        return 1
    return 0


@contextmanager
def _process_state(cwd: Path, env: Mapping[str, str]) -> Iterator[None]:
    """Run in ``cwd`` with ``env`` added; put back everything a run of the app changes in the
    process."""
    with ExitStack() as stack:
        stack.callback(_clear_hydra)
        stack.enter_context(_kept_logging())
        stack.enter_context(_kept_torch_switches())
        stack.enter_context(_kept_signals(signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
        stack.enter_context(_kept_interpreter_state())
        stack.enter_context(_offline_hub())
        os.environ.update(env)
        sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.chdir(cwd)
        _clear_hydra()
        yield


def _clear_hydra() -> None:
    GlobalHydra.instance().clear()
    HydraConfig.instance().cfg = None  # a later test must not find a "running" Hydra job


@contextmanager
def _kept_interpreter_state() -> Iterator[None]:
    argv, path, cwd, environ = list(sys.argv), list(sys.path), os.getcwd(), dict(os.environ)
    unraisable = sys.unraisablehook  # the CLI hands interrupts lost in finalizers on
    try:
        yield
    finally:
        # sys.path: the same list object, which importlib holds on to
        sys.argv, sys.path[:], sys.unraisablehook = argv, path, unraisable
        gc.unfreeze()  # a sweep freezes what survives its jobs: the session's objects again
        os.chdir(cwd)
        for key in set(os.environ) - set(environ):
            del os.environ[key]
        os.environ.update(environ)


@contextmanager
def _offline_hub() -> Iterator[None]:
    """huggingface_hub reads ``HF_HUB_OFFLINE`` at import: set its constant too, as a fresh process
    would."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved


@contextmanager
def _kept_signals(*signums: int) -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in signums}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@contextmanager
def _kept_torch_switches() -> Iterator[None]:
    """The switches a device adapter sets for the process (``device.deterministic``,
    ``device.threads``)."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    threads, cudnn = torch.get_num_threads(), (torch.backends.cudnn.deterministic,
                                               torch.backends.cudnn.benchmark)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.set_num_threads(threads)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn


@contextmanager
def _kept_logging() -> Iterator[None]:
    """Undo Hydra's ``logging.config.dictConfig`` of the job: handlers, levels and switches of every
    logger."""
    manager = logging.Logger.manager
    saved = {name: _logger_state(logger) for name, logger in manager.loggerDict.items()
             if isinstance(logger, logging.Logger)}
    root = _logger_state(logging.getLogger())
    try:
        yield
    finally:
        for name, logger in list(manager.loggerDict.items()):
            if isinstance(logger, logging.Logger):
                _restore_logger(logger, saved.get(name, (logging.NOTSET, [], False, True)))
        _restore_logger(logging.getLogger(), root)


def _logger_state(logger: logging.Logger) -> tuple:
    return logger.level, list(logger.handlers), logger.disabled, logger.propagate


def _restore_logger(logger: logging.Logger, state: tuple) -> None:
    level, handlers, disabled, propagate = state
    for handler in list(logger.handlers):
        if handler not in handlers:
            logger.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in logger.handlers:
            logger.addHandler(handler)
    logger.setLevel(level)
    logger.disabled, logger.propagate = disabled, propagate
