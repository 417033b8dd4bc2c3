"""Per-job cost of a sweep outside the model calls, on the real CLI.

A 4-job multirun of the tiny FLUX.2 twin (32 px, CPU) whose CPU reference is already cached (a first
single job fills a private cache), so every sweep job is a cache hit. Two figures per job, from the
records and the sweep's wall clock:
  * in the job: ``timing.duration_s`` minus the time inside model calls (cold call, warm-ups and timed
    calls, as the record lists them): config, device, load, inputs, reference (cache read), evaluate,
    compare, artifacts, and the timing loop's own bookkeeping;
  * around the job: the sweep's wall time minus its jobs' durations and minus one `--cfg job` start-up
    (the process start every command pays), shared out over the jobs: Hydra's launch, the callbacks,
    the summary.
Goal: their sum <= 0.5 s per job. Also printed: `--help`, `--version`, `--cfg job` against
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


def sweep_overhead(env: dict[str, str], cwd: str) -> None:
    """Run the cached 4-job sweep and print the per-job cost outside the model calls."""
    work = Path(cwd)
    subprocess.run([sys.executable, "-m", "ascendbench", *TINY, f"hydra.run.dir={work / 'fill'}"],
                   check=True, capture_output=True, env=env, cwd=cwd)  # fills the reference cache
    startup = wall_s(["-m", "ascendbench", "--cfg", "job", *TINY], env, cwd)
    values = ",".join(str(i) for i in range(JOBS))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ascendbench", "-m", *TINY, f"bench.warmup={values}",
                    f"hydra.sweep.dir={work / 'sweep'}"], check=True, capture_output=True, env=env, cwd=cwd)
    sweep_wall = time.perf_counter() - t0
    records = [json.loads(p.read_text()) for p in sorted((work / "sweep").glob("*/record.json"))]
    assert len(records) == JOBS and all(r["baseline"].get("cache_hit") for r in records), "expected 4 cache hits"
    in_job = [r["timing"]["duration_s"] - model_call_s(r) for r in records]
    around = (sweep_wall - sum(r["timing"]["duration_s"] for r in records) - startup) / JOBS
    per_job = statistics.mean(in_job) + around
    stages = {k: statistics.mean(r["timing"]["stages_s"][k] for r in records)
              for k in records[0]["timing"]["stages_s"] if k != "device_run"}
    print(f"{JOBS}-job sweep, every reference a cache hit: per-job overhead outside model calls {per_job:.2f} s "
          f"(in the job {statistics.mean(in_job):.2f} s + around it {around:.2f} s; goal <= {GOAL_PER_JOB_S} s); "
          f"sweep wall {sweep_wall:.1f} s")
    print("  in-job stages (mean s): " + ", ".join(f"{k} {v:.3f}" for k, v in stages.items()))


def main() -> None:
    """Start-up ratios, then the sweep's per-job overhead."""
    with tempfile.TemporaryDirectory() as cwd:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "ASCENDBENCH_CACHE": str(Path(cwd) / "cache")}
        startup_ratios(env, cwd)
        sweep_overhead(env, cwd)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (timings drift with the host's load)")


if __name__ == "__main__":
    main()
