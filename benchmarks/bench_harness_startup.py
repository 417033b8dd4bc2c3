"""Start-up: how long before ascendbench does useful work.

Side by side in one process:
  * `python -m ascendbench --help` wall time (subprocesses, median of 3), next to
    `python -c "import torch"` (the floor any torch tool pays) -- their ratio is printed;
  * compose-to-first-call: in process, from composing the config to the first model call of a tiny
    CPU job (device adapter, model build, inputs, placement, all the runner's own stages), against
    the first call's own duration; the runner is the real one, only the task's `run` is watched.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

RUNS = 3
TINY_JOB = [
    "model=tiny_flux2_decoder",
    "device=cpu",
    "preset.height=32",
    "preset.width=32",
    "baseline.enabled=false",
    "bench.iters=1",
    "bench.warmup=0",
    "bench.flops.enabled=false",
]


def wall_s(args: list[str]) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], check=True, capture_output=True, env=env, cwd=tempfile.gettempdir()
    )
    return time.perf_counter() - t0


def compose_to_first_call() -> tuple[float, float, float, float]:
    """Seconds: compose to the first task.run, the first call, all model calls, the whole job."""
    from ascendbench.job.runner import run_job
    from ascendbench.tasks.vae_decode import VaeDecodeTask

    stamps: list[float] = []
    original = VaeDecodeTask.run

    def watched(self, model, inputs):
        stamps.append(time.perf_counter())
        out = original(self, model, inputs)
        stamps.append(time.perf_counter())
        return out

    VaeDecodeTask.run = watched
    try:
        GlobalHydra.instance().clear()
        t0 = time.perf_counter()
        with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
            cfg = compose(config_name="config", overrides=TINY_JOB)
        with tempfile.TemporaryDirectory() as job_dir, contextlib.redirect_stdout(io.StringIO()):
            run_job(cfg, Path(job_dir))
        t_end = time.perf_counter()
    finally:
        VaeDecodeTask.run = original
        GlobalHydra.instance().clear()
    in_calls = sum(end - start for start, end in zip(stamps[::2], stamps[1::2], strict=False))
    return stamps[0] - t0, stamps[1] - stamps[0], in_calls, t_end - t0


def main() -> None:
    logging.getLogger("ascendbench").setLevel(logging.ERROR)
    helps, imports = [], []
    for _ in range(RUNS):  # interleaved so both see the same host load
        helps.append(wall_s(["-m", "ascendbench", "--help"]))
        imports.append(wall_s(["-c", "import torch"]))
    help_s, torch_s = statistics.median(helps), statistics.median(imports)
    print(
        f"`python -m ascendbench --help`: {help_s:.2f} s; "
        f"`python -c 'import torch'`: {torch_s:.2f} s; "
        f"ratio {help_s / torch_s:.2f} (median of {RUNS})"
    )
    compose_to_first_call()  # warm: imports and the first torch kernels are paid once per process
    setup, first, in_calls, job = compose_to_first_call()
    print(
        f"compose-to-first-call (second job in this process): {setup * 1e3:.1f} ms; "
        f"first call {first * 1e3:.1f} ms; whole job {job * 1e3:.1f} ms, of which model calls "
        f"{in_calls * 1e3:.1f} ms; ascendbench's own share: {(job - in_calls) / job:.0%}"
    )


if __name__ == "__main__":
    main()
