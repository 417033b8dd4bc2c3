"""Per-job cost of a sweep outside the model calls, on the real CLI.

An 8-job and a 1-job multirun of the tiny FLUX.2 twin (32 px, CPU) whose CPU reference is already
cached (a first single job fills a private cache), so every sweep job is a cache hit. The marginal
cost of a job is the difference of the two sweeps' wall times less the difference of the time inside
model calls (cold call, warm-ups and timed calls, as the records list them), over the 7 extra jobs:
config, device, load, inputs, reference (cache read), evaluate, compare, artifacts, the timing
loop's bookkeeping, Hydra's launch (composing the job's config, its .hydra files, logging) and the
callbacks -- but not what the process pays once (Python, torch and diffusers imports). The timing
loop runs its fixed protocol with two timed calls (the sweep varies the warm-up count) on one CPU
thread (``device.threads=1``: two torch threads on a busy 2-core host make a 5 ms call take 700 ms),
so that model calls, subtracted but noisy on a shared host, stay a small part of the walls; the
sweeps write no ``collect_env.txt`` (once per sweep, not per job: its ``pip`` subprocesses' seconds
vary more than a job costs); the 1-job/8-job pair runs ``PAIRS`` times, interleaved, and the median
is printed. The same figure is also taken inside the sweep process, from its console lines' times
(the batch check that composes every job's config, then the jobs after the second: the first
job's end is followed by the launcher's first collection, which walks what that job imported, a
once-per-process cost like the imports, which the walls' difference cancels too), which leaves out
the seconds-wide noise of starting two processes. Beside them, the marginal CPU time (user + system)
of a job, model calls included: an upper bound of the overhead's own CPU seconds, which a loaded
host inflates less than walls.
Goal: <= 0.5 s per job. Also printed: `--help`, `--version`, `--cfg job` against
`python -c "import torch"` (goal for --help: ratio <= 1.3), medians of interleaved runs. Every
figure is printed with the host's 1-minute load average (``/proc/loadavg``) when it was taken.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 3
PAIRS = 3
JOBS = 8  # the walls' start-up noise (1-job walls 7.2-9.7 s in one run) is shared by 7 jobs, not 3
GOAL_PER_JOB_S = 0.5
GOAL_HELP_RATIO = 1.3
TINY = [
    "model=tiny_flux2_decoder",
    "device=cpu",
    "preset.height=32",
    "preset.width=32",
    "bench.flops.enabled=false",
    "bench.protocol=fixed",
    "bench.iters=2",
    "device.threads=1",
]


def load() -> str:
    """``load <1-minute load average>`` of the host now (timings drift with it)."""
    return f"load {os.getloadavg()[0]:.2f}"


def wall_s(args: list[str], env: dict[str, str], cwd: str) -> float:
    """Wall seconds of one ``python <args>`` subprocess (it must exit 0)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, capture_output=True, env=env, cwd=cwd)
    return time.perf_counter() - t0


def model_call_s(record: dict) -> float:
    """Seconds the record says were spent inside model calls: cold call, warm-ups, timed calls."""
    bench = record.get("bench") or {}
    calls_ms = [
        bench.get("cold_ms") or 0.0,
        *(bench.get("warmup") or {}).get("calls_ms", []),
        *(bench.get("samples_ms") or []),
    ]
    return sum(calls_ms) / 1e3


def startup_ratios(env: dict[str, str], cwd: str) -> None:
    """Print `--help`, `--version` and `--cfg job` wall times against `import torch` (interleaved
    medians)."""
    commands = {
        "--help": ["-m", "ascendbench", "--help"],
        "--version": ["-m", "ascendbench", "--version"],
        "--cfg job": ["-m", "ascendbench", "--cfg", "job"],
        "import torch": ["-c", "import torch"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(RUNS):
        for name, args in commands.items():
            times[name].append(wall_s(args, env, cwd))
    torch_s = statistics.median(times["import torch"])
    for name in ("--help", "--version", "--cfg job"):
        value = statistics.median(times[name])
        goal = f" (goal <= {GOAL_HELP_RATIO})" if name == "--help" else ""
        print(
            f"`python -m ascendbench {name}`: {value:.2f} s = {value / torch_s:.2f} x "
            f"`import torch` ({torch_s:.2f} s){goal}, median of {RUNS}; {load()}"
        )


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
EVENTS = {
    "check": re.compile(r"\[sweep\] \d+ job\(s\) to run"),
    "launch": re.compile(r"Launching \d+ jobs"),
    "ended": re.compile(r"\[sweep\] job \d+ of \d+ .* ended "),
}


def log_times(text: str) -> dict[str, list[float]]:
    """Seconds (epoch) of the sweep's console lines: ``check`` (the sweep starts: Hydra then
    composes every job's config to check the batch), ``launch`` (the launcher starts) and each job's
    ``ended``."""
    found: dict[str, list[float]] = {name: [] for name in EVENTS}
    for line in text.splitlines():
        if (stamp := STAMP.match(line)) is None:
            continue
        when = datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for name, pattern in EVENTS.items():
            if pattern.search(line):
                found[name].append(when)
    return found


def _sweep(
    env: dict[str, str], cwd: str, name: str, jobs: int
) -> tuple[float, float, list[dict], dict]:
    """Wall and CPU seconds of a ``jobs``-job multirun of the tiny twin, its records (references
    cached) and the times of its console lines (:func:`log_times`)."""
    work = Path(cwd)
    values = ",".join(str(i) for i in range(jobs))
    t0, cpu0 = time.perf_counter(), _cpu_s()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ascendbench",
            "-m",
            *TINY,
            f"bench.warmup={values}",
            "hydra.callbacks.summary.collect_env_timeout_s=0",
            f"hydra.sweep.dir={work / name}",
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
    wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    records = [json.loads(p.read_text()) for p in sorted((work / name).glob("*/record.json"))]
    assert len(records) == jobs and all(r["baseline"].get("cache_hit") for r in records), (
        "expected cache hits"
    )
    times = log_times(done.stdout + done.stderr)
    assert len(times["ended"]) == jobs and times["check"] and times["launch"], (
        "the sweep's console lines"
    )
    return wall, cpu, records, times


def _pair(env: dict[str, str], cwd: str, index: int) -> dict:
    """One 1-job and one 8-job sweep: the marginal cost per job, the in-job part, the walls, the
    stages."""
    one_wall, one_cpu, one, one_log = _sweep(env, cwd, f"one{index}", 1)
    many_wall, many_cpu, many, many_log = _sweep(env, cwd, f"many{index}", JOBS)
    calls = sum(model_call_s(r) for r in many) - sum(model_call_s(r) for r in one)
    later = many[1:]  # the jobs after the first, which pays the process's imports inside its stages
    # In the sweep process, without its start: the batch check composes every job's config
    # (check -> launch; one job's share: the 8-job check less the 1-job check, over 7), then the
    # jobs after the second run one after the other (the second job's end -> the last's, less
    # their model calls, over 6). Not from the first job's end: the launcher's first collection
    # follows it (0.3 s here: it walks what the first job imported, once per process).
    checking = (many_log["launch"][0] - many_log["check"][0]) - (
        one_log["launch"][0] - one_log["check"][0]
    )
    running = many_log["ended"][-1] - many_log["ended"][1] - sum(model_call_s(r) for r in many[2:])
    stages = {
        k: statistics.mean(r["timing"]["stages_s"][k] for r in later)
        for k in later[0]["timing"]["stages_s"]
        if k != "device_run"
    }
    return {
        "per_job": (many_wall - one_wall - calls) / (JOBS - 1),
        "walls": (many_wall, one_wall),
        "stages": stages,
        "cpu_per_job": (many_cpu - one_cpu) / (JOBS - 1),
        "in_sweep": checking / (JOBS - 1) + running / (JOBS - 2),
        "composing": checking / (JOBS - 1),
        "in_job": statistics.mean(r["timing"]["duration_s"] - model_call_s(r) for r in later),
        "load": load(),
    }


def sweep_overhead(env: dict[str, str], cwd: str) -> None:
    """The marginal cost of a sweep job outside its model calls: an 8-job sweep against a 1-job
    sweep, so that what a process pays once (starting Python, importing torch and diffusers) is not
    charged to every job."""
    subprocess.run(
        [sys.executable, "-m", "ascendbench", *TINY, f"hydra.run.dir={Path(cwd) / 'fill'}"],
        check=True,
        capture_output=True,
        env=env,
        cwd=cwd,
    )  # fills the reference cache
    pairs = [_pair(env, cwd, i) for i in range(PAIRS)]
    for pair in pairs:
        print(
            f"  pair: {pair['per_job']:.2f} s per job (inside the job {pair['in_job']:.2f} s), "
            f"walls {pair['walls'][0]:.1f} s / {pair['walls'][1]:.1f} s, "
            f"CPU {pair['cpu_per_job']:.2f} s per job with its model calls; "
            f"in the sweep process {pair['in_sweep']:.2f} s per job; {pair['load']}"
        )
    middle = sorted(pairs, key=lambda pair: pair["per_job"])[len(pairs) // 2]
    print(
        f"sweep of {JOBS} vs 1 job(s), every reference a cache hit: marginal cost per job "
        f"outside model calls {middle['per_job']:.2f} s (goal <= {GOAL_PER_JOB_S} s), "
        f"median of {PAIRS} pairs; of it inside the job "
        f"(jobs 2-{JOBS}) {middle['in_job']:.2f} s, Hydra's launch and the callbacks the rest "
        f"{middle['per_job'] - middle['in_job']:.2f} s; {middle['load']}"
    )
    in_sweep = sorted(pairs, key=lambda pair: pair["in_sweep"])[len(pairs) // 2]
    print(
        f"  the same inside the sweep process (its console lines' times, so without the noise of "
        f"starting two processes): {in_sweep['in_sweep']:.2f} s per job outside model calls "
        f"(goal <= {GOAL_PER_JOB_S} s), of it composing its config {in_sweep['composing']:.2f} s, "
        f"median of {PAIRS} pairs; {in_sweep['load']}"
    )
    cpu = statistics.median(pair["cpu_per_job"] for pair in pairs)
    print(
        f"  CPU time (user + system) per job, model calls included: {cpu:.2f} s, "
        f"median of {PAIRS} pairs (an upper bound of the overhead's CPU seconds; "
        "the host's load inflates wall times, not these)"
    )
    print(
        f"  in-job stages, jobs 2-{JOBS} (mean s): "
        + ", ".join(f"{k} {v:.3f}" for k, v in middle["stages"].items())
    )


def main() -> None:
    """Start-up ratios, then the sweep's per-job overhead."""
    with tempfile.TemporaryDirectory() as cwd:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "ASCENDBENCH_CACHE": str(Path(cwd) / "cache")}
        startup_ratios(env, cwd)
        sweep_overhead(env, cwd)
    print(f"at the end: {load()} (timings drift with the host's load)")


if __name__ == "__main__":
    main()
