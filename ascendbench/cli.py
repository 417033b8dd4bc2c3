"""The Hydra app behind ``python -m ascendbench``: exit 1 when any job did not finish ``ok`` or
failed ``fail_on`` (a search: :func:`~ascendbench.job.objective.search_exit_status`)."""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import gc
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import hydra
import psutil
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from omegaconf import DictConfig

import ascendbench
from ascendbench.compat import exit_if_unsupported, library_versions, missing_extra
from ascendbench.config import hydra_config_path
from ascendbench.config.schemas import register
from ascendbench.config.targets import callback_problems
from ascendbench.digits import figure
from ascendbench.errors import JobDirBusyError, JobDirError
from ascendbench.job.launch import launch_outcomes, note_outcome, register_resolvers
from ascendbench.job.objective import job_outcome, search_exit_status
from ascendbench.metrics.verdict import ORDER
from hydra_plugins.ascendbench_launcher import AscendbenchLauncher

_JOBS: list[dict[str, Any]] = []  # this process's jobs: {"status": gated status[, "objective": v]}
_IN_JOB: list[bool] = []  # non-empty while this process runs a job (_follow_launcher, _job_over)
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT
VERSION_LIBRARIES = ("torch", "torch_npu", "diffusers", "hydra-core")
LAUNCHER = "ASCENDBENCH_LAUNCHER"  # host:pid of the launching process, inherited by its workers
ENDED_WORKER = b"ab-ended-job"  # a joblib worker's process name once its job's record is final

log = logging.getLogger(__name__)

register()  # the config schemas, also when conf/ is read as a plain directory (a checkout)
register_resolvers()  # sweep job dir names and the launch token (also in worker processes)


@contextlib.contextmanager
def _frozen_imports() -> Any:
    """The first import of the job's modules with the collector paused, what it made frozen: no
    full passes over its ~0.5 million objects, which live as long as the process (seven passes,
    0.7 s, in the import; 0.2-0.3 s less for each later pass)."""
    first, enabled = "ascendbench.job.runner" not in sys.modules, gc.isenabled()
    if first:
        gc.collect()  # what Hydra left (its composition), not frozen with the modules
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
    if first:
        gc.freeze()


@hydra.main(version_base="1.3", config_path=hydra_config_path(), config_name="config")
def _app(cfg: DictConfig) -> str | float:
    with _frozen_imports():  # torch and the stages, which --help, --version and --cfg never need
        from ascendbench.job.runner import run_job

    job_dir = Path(HydraConfig.get().runtime.output_dir)
    record: dict = {"status": "not run"}
    try:
        _follow_launcher()
        record = run_job(cfg, job_dir)
        status = _gate(record, cfg.get("fail_on"))
    except KeyboardInterrupt:
        if _launcher() not in (None, str(os.getpid())):  # a worker: its record says `interrupted`
            _end_worker()
        raise
    except (JobDirBusyError, JobDirError) as exc:  # nothing of the job was written: say so
        log.error("job not run (%s): %s", exc.reason, exc)
        status = exc.reason
    finally:
        _job_over()
    outcome = job_outcome(status, record, cfg.get("objective"), cfg.get("fail_on"))
    _JOBS.append(outcome)
    note_outcome(job_dir=job_dir, **outcome)
    if "objective" in outcome:  # an optimisation sweep: the sampler reads a number
        value = outcome["objective"]
        log.info("objective %s: %s", cfg.objective,
                 f"{figure(value)} ms" if math.isfinite(value) else "inf (did not pass)")
    return outcome.get("objective", status)


def _gate(record: dict, fail_on: str | None) -> str:
    verdict = record.get("verdict")
    failing = fail_on and verdict in ORDER and ORDER[verdict] >= ORDER[fail_on]
    return f"verdict {verdict}" if record["status"] == "ok" and failing else record["status"]


def version_text() -> str:
    """``ascendbench <version>`` and the installed versions of the libraries a run depends on."""
    versions = library_versions(VERSION_LIBRARIES).items()
    return "\n".join([f"ascendbench {ascendbench.__version__}"]
                     + [f"{name} {version or 'not installed'}" for name, version in versions])


def _launcher() -> str | None:
    host, _, pid = os.environ.get(LAUNCHER, "").rpartition(":")
    return pid if host == socket.gethostname() else None


def _follow_launcher() -> None:
    """In a joblib worker: SIGTERM (an `interrupted` record) when the launcher dies, even killed."""
    _IN_JOB.append(True)
    pid = _launcher()
    main = threading.current_thread() is threading.main_thread()
    if pid in (None, str(os.getpid())) or not main or not sys.platform.startswith("linux"):
        return  # the launcher itself, a basic-launcher job, another host's job
    if str(os.getppid()) == pid:
        _end_on_termination()
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if not psutil.pid_exists(int(pid)):  # gone before this worker could follow it
        raise KeyboardInterrupt("signal SIGTERM (the launching process is gone)")


def _job_over() -> None:
    # here, not in _app: joblib's workers run a copy of _app (pickled by value), its globals too
    _IN_JOB.clear()


def _end_on_termination() -> None:
    """SIGTERM (Slurm preemption, `kill`) and SIGHUP (a closed terminal): `interrupted` records."""
    for name in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(name, _terminated)
    sys.unraisablehook = _lost_interrupt


def _terminated(signum: int, frame: object) -> None:
    if isinstance(sys.exc_info()[1], KeyboardInterrupt):  # a second signal (one per launcher
        return  # thread that dies) while the first's `interrupted` record is written: let it be
    if _launcher() == str(os.getpid()):  # the launcher: its joblib workers first
        _stop_workers(signum)
    elif _launcher() is not None and not _IN_JOB:
        _end_worker()  # a joblib worker between jobs: nothing to record
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _end_worker() -> None:
    """A joblib worker whose job is over ends with its launcher (its name tells the launcher): one
    ending first made joblib kill the other workers at once, maybe mid-record."""
    logging.shutdown()
    ctypes.CDLL(None, use_errno=True).prctl(15, ENDED_WORKER)  # 15: PR_SET_NAME
    while str(os.getppid()) == _launcher():
        time.sleep(0.05)
    os._exit(EXIT_INTERRUPTED)  # its card lock with it


def _lost_interrupt(unraisable: Any) -> None:
    """An interrupt whose handler ran inside a finalizer (``__del__``, a weakref callback): Python
    prints it and drops it there, so it is delivered again, from outside, to the code running."""
    sys.__unraisablehook__(unraisable)
    if isinstance(exc := unraisable.exc_value, KeyboardInterrupt):
        name = str(exc).split()[1] if str(exc).startswith("signal ") else "SIGINT"
        threading.Timer(0.01, _thread.interrupt_main, (signal.Signals[name],)).start()


def _stop_workers(signum: int, wait_s: float = 15.0) -> None:
    """Pass the signal to this launcher's joblib workers; wait (``wait_s``) for their records."""
    workers = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if any("popen_loky" in part for part in child.cmdline()):  # joblib's worker
                child.send_signal(signum)
                workers.append(child)
    deadline = time.monotonic() + wait_s
    while any(map(_still_working, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)


def _still_working(worker: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):  # gone: not working
        return worker.status() != psutil.STATUS_ZOMBIE and worker.name() != ENDED_WORKER.decode()
    return False


def main() -> None:
    """Entry point: run the Hydra app, then exit with the jobs' status (see the module doc)."""
    if "--version" in sys.argv[1:]:  # before Hydra, whose own --version prints only Hydra's
        print(version_text())
        return
    try:
        Path.cwd()  # Hydra reads it first: a raw traceback otherwise
    except FileNotFoundError:
        print("ascendbench: the working directory was deleted (or moved away), and the job's "
              "output directories are relative to it. `cd` into one that exists, then run the "
              "command again.", file=sys.stderr)
        sys.exit(2)
    exit_if_unsupported()  # torch/diffusers below the supported floor: one paragraph, exit 2
    Plugins.instance().register(AscendbenchLauncher)  # an editable install hides it from the scan
    for arg in (a for a in sys.argv[1:] if "=" in a):
        if hint := missing_extra(arg.lstrip("+~").split("=", 1)[0]):
            sys.exit(f"ascendbench: `{arg}` needs an optional extra that is not installed (its "
                     f"sweeper plugin). Install it with `{hint}` (it installs no torch), then run "
                     "the command again.")
    if refused := callback_problems(sys.argv[1:]):
        sys.exit(f"ascendbench: {'; '.join(refused)}. Hydra builds hydra.callbacks before any job "
                 "starts, so nothing ran: remove the node from the folder or the override.")
    _JOBS.clear()
    os.environ[LAUNCHER] = f"{socket.gethostname()}:{os.getpid()}"
    _end_on_termination()
    try:
        _app()  # a refused directory or card pool: SystemExit, its paragraph on stderr, exit 1
    except KeyboardInterrupt as exc:
        cause = str(exc) if str(exc).startswith("signal ") else "Ctrl-C / SIGINT"
        print(f"ascendbench: interrupted ({cause}); a job still running then has a record saying "
              "`interrupted`, finished jobs keep theirs, and re-running the same sweep resumes it.",
              file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    outcomes = [*_JOBS, *launch_outcomes()]  # a job seen twice changes nothing
    code = (search_exit_status(outcomes) if any("objective" in o for o in outcomes)
            else int(any(outcome.get("status") != "ok" for outcome in outcomes)))
    if code:
        sys.exit(code)
