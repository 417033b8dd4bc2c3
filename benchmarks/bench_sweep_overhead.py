"""Per-job cost of a sweep outside the model calls, on the real CLI.

A 4-job and a 1-job multirun of the tiny FLUX.2 twin (32 px, CPU) whose CPU reference is already cached (a
first single job fills a private cache), so every sweep job is a cache hit. The marginal cost of a job is
the difference of the two sweeps' wall times less the difference of the time inside model calls (cold
call, warm-ups and timed calls, as the records list them), over the 3 extra jobs: config, device, load,
inputs, reference (cache read), evaluate, compare, artifacts, the timing loop's bookkeeping, Hydra's launch
and the callbacks -- but not what the process pays once (Python, torch and diffusers imports).
Goal: <= 0.5 s per job. Also printed: `--help`, `--version`, `--cfg job` against
`python -c "import torch"` (goal for --help: ratio <= 1.3), medians of interleaved runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 3
JOBS = 4
GOAL_PER_JOB_S = 0.5
GOAL_HELP_RATIO = 1.3
TINY = ["model=tiny_flux2_decoder", "device=cpu", "preset.height=32", "preset.width=32", "bench.flops.enabled=false"]


def wall_s(args: list[str], env: dict[str, str], cwd: str) -> float:
    """Wall seconds of one ``python <args>`` subprocess (it must exit 0)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, capture_output=True, env=env, cwd=cwd)
    return time.perf_counter() - t0


def model_call_s(record: dict) -> float:
    """Seconds the record says were spent inside model calls: cold call, warm-ups, timed calls."""
    bench = record.get("bench") or {}
    calls_ms = [bench.get("cold_ms") or 0.0, *(bench.get("warmup") or {}).get("calls_ms", []),
                *(bench.get("samples_ms") or [])]
    return sum(calls_ms) / 1e3


def startup_ratios(env: dict[str, str], cwd: str) -> None:
    """Print `--help`, `--version` and `--cfg job` wall times against `import torch` (interleaved medians)."""
    commands = {"--help": ["-m", "ascendbench", "--help"], "--version": ["-m", "ascendbench", "--version"],
                "--cfg job": ["-m", "ascendbench", "--cfg", "job"], "import torch": ["-c", "import torch"]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(RUNS):
        for name, args in commands.items():
            times[name].append(wall_s(args, env, cwd))
    torch_s = statistics.median(times["import torch"])
    for name in ("--help", "--version", "--cfg job"):
        value = statistics.median(times[name])
        goal = f" (goal <= {GOAL_HELP_RATIO})" if name == "--help" else ""
        print(f"`python -m ascendbench {name}`: {value:.2f} s = {value / torch_s:.2f} x `import torch` "
              f"({torch_s:.2f} s){goal}, median of {RUNS}")


def _sweep(env: dict[str, str], cwd: str, name: str, jobs: int) -> tuple[float, list[dict]]:
    """Wall seconds of a ``jobs``-job multirun of the tiny twin and its records (every reference cached)."""
    work = Path(cwd)
    values = ",".join(str(i) for i in range(jobs))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ascendbench", "-m", *TINY, f"bench.warmup={values}",
                    f"hydra.sweep.dir={work / name}"], check=True, capture_output=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    records = [json.loads(p.read_text()) for p in sorted((work / name).glob("*/record.json"))]
    assert len(records) == jobs and all(r["baseline"].get("cache_hit") for r in records), "expected cache hits"
    return wall, records


def sweep_overhead(env: dict[str, str], cwd: str) -> None:
    """The marginal cost of a sweep job outside its model calls: a 4-job sweep against a 1-job sweep, so that
    what a process pays once (starting Python, importing torch and diffusers) is not charged to every job."""
    subprocess.run([sys.executable, "-m", "ascendbench", *TINY, f"hydra.run.dir={Path(cwd) / 'fill'}"],
                   check=True, capture_output=True, env=env, cwd=cwd)  # fills the reference cache
    one_wall, one = _sweep(env, cwd, "one", 1)
    many_wall, many = _sweep(env, cwd, "many", JOBS)
    calls = sum(model_call_s(r) for r in many) - sum(model_call_s(r) for r in one)
    per_job = (many_wall - one_wall - calls) / (JOBS - 1)
    later = many[1:]  # the jobs after the first, which pays the process's imports inside its stages
    stages = {k: statistics.mean(r["timing"]["stages_s"][k] for r in later)
              for k in later[0]["timing"]["stages_s"] if k != "device_run"}
    in_job = statistics.mean(r["timing"]["duration_s"] - model_call_s(r) for r in later)
    print(f"sweep of {JOBS} vs 1 job(s), every reference a cache hit: marginal cost per job outside model calls "
          f"{per_job:.2f} s (goal <= {GOAL_PER_JOB_S} s); of it inside the job (jobs 2-{JOBS}) {in_job:.2f} s; "
          f"walls {many_wall:.1f} s / {one_wall:.1f} s")
    print("  in-job stages, jobs 2-4 (mean s): " + ", ".join(f"{k} {v:.3f}" for k, v in stages.items()))


def main() -> None:
    """Start-up ratios, then the sweep's per-job overhead."""
    with tempfile.TemporaryDirectory() as cwd:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "ASCENDBENCH_CACHE": str(Path(cwd) / "cache")}
        startup_ratios(env, cwd)
        sweep_overhead(env, cwd)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (timings drift with the host's load)")


if __name__ == "__main__":
    main()
