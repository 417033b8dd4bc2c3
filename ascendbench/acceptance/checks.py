"""The acceptance checks: each takes the :class:`Suite`, returns Checks (docs/devices.md)."""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.loop import run_bench
from ascendbench.bench.measure import Workload, measure
from ascendbench.bench.stats import median_ci_ranks
from ascendbench.devices import runtime as device_runtime
from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.graph import first_call
from ascendbench.precision import torch_dtype
from ascendbench.progress import quiet_logger
from ascendbench.verify import checks as host_checks

FIDELITY = (0.98, 1.02)
MFU_FLOOR = 0.5
MEMORY_BAND = (0.95, 1.05)
TIMING_ROUNDS, ROUND_ITERS = 151, 7  # short interleaved rounds share the host's load of the moment
# More rounds while the median ratio's 95 % interval straddles an edge of the band (a loaded host
# spreads the per-round ratios: 151 rounds then leave the median +-2 % to chance).
MORE_ROUNDS, MAX_ROUNDS, MAX_TIMING_S = 100, 1501, 120.0


@dataclass
class Check:
    """One line of the acceptance report."""

    name: str
    status: str
    figure: str
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Sizes:
    """Problem sizes of one device kind: the GEMM (M=N=K) and its dtype, the accuracy sweep."""

    gemm: int
    gemm_dtype: str
    model: str
    dtypes: tuple[str, ...]
    presets: tuple[str, ...]
    oom_rows: int


ACCELERATOR = Sizes(gemm=8192, gemm_dtype="bfloat16", model="flux2_small_decoder",
                    dtypes=("float32", "bfloat16", "float16"), presets=("balanced", "quality"),
                    oom_rows=300_000)
CPU = Sizes(gemm=512, gemm_dtype="float32", model="tiny_flux2_decoder", dtypes=("float32",),
            presets=("mini",), oom_rows=0)


@dataclass
class Suite:
    """Where and how the checks run: the device, the work directory, the reference cache."""

    device: str
    work: Path
    cache: Path | None = None
    timeout_s: float = 900.0

    @property
    def sizes(self) -> Sizes:
        """The accelerator sizes, or the CPU's small ones."""
        return CPU if self.device == "cpu" else ACCELERATOR

    def jobs(self, name: str, args: list[str]) -> tuple[int, list[dict[str, Any]], str]:
        """Run ``python -m ascendbench -m ARGS`` into ``work/name``: (exit code, records, tail)."""
        out = self.work / name
        cache = [f"baseline.cache_dir={self.cache}"] if self.cache else []
        command = [sys.executable, "-m", "ascendbench", "-m", f"device={self.device}", *args,
                   *cache, f"hydra.sweep.dir={out}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout_s)
        records = [json.loads(p.read_text()) for p in sorted(out.glob("*/record.json"))]
        return done.returncode, records, (done.stdout + done.stderr)[-2000:]


def _ratio_status(ratio: float | None, band: tuple[float, float]) -> str:
    return "PASS" if ratio is not None and band[0] <= ratio <= band[1] else "FAIL"


def check_verify(suite: Suite) -> list[Check]:
    """The device lines of ``verify``: the requested device must be usable."""
    mine = [c for c in host_checks.run_checks(timeout_s=60, hub_timeout_s=2)
            if c.name.startswith("device") and c.name.split()[-1].split(":")[0] == suite.device]
    status = "PASS" if mine and all(c.status == "PASS" for c in mine) else "FAIL"
    figure = "; ".join(f"{c.name}: {c.detail}" for c in mine) or "device not listed"
    return [Check("verify", status, figure)]


def _gemm(suite: Suite) -> tuple[Any, Callable[[], torch.Tensor]]:
    adapter = DeviceAdapter(suite.device)
    n, dtype = suite.sizes.gemm, torch_dtype(suite.sizes.gemm_dtype)
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator).to(adapter.torch_device, dtype)
    b = torch.randn(n, n, generator=generator).to(adapter.torch_device, dtype)
    return adapter, lambda: torch.mm(a, b)


def plain_loops(adapter: Any, op: Callable[[], Any], iters: int,
                untimed: int = 0) -> dict[str, float | None]:
    """Medians (ms) of a synchronized host loop and a device-event loop after ``untimed`` calls."""
    for _ in range(untimed):
        op()
    host, device = [first_call(op, adapter) for _ in range(iters)], []  # synchronized host ms
    begin, end = adapter.new_event(), adapter.new_event()
    for _ in range(iters if begin is not None else 0):
        begin.record()
        op()
        end.record()
        end.synchronize()
        device.append(begin.elapsed_time(end))
    return {"host_ms": statistics.median(host),
            "event_ms": statistics.median(device) if device else None}


def timing_rounds(harness: Callable[[], float], plain: Callable[[], dict[str, float | None]],
                  rounds: int, seed: int = 0) -> dict[str, list[float]]:
    """Per-round ratios harness / plain in seeded random order (a load slows both alike)."""
    rng, ratios = random.Random(seed), {"host": [], "event": []}
    for _ in range(rounds):
        order = rng.sample(["harness", "plain"], 2)
        got = {name: harness() if name == "harness" else plain() for name in order}
        ratios["host"].append(got["harness"] / got["plain"]["host_ms"])
        if got["plain"].get("event_ms"):
            ratios["event"].append(got["harness"] / got["plain"]["event_ms"])
    return ratios


def median_interval(ratios: list[float]) -> tuple[float, float] | None:
    """The distribution-free 95 % interval of the median (order statistics), or None (< 6)."""
    ranks = median_ci_ranks(len(ratios))
    ordered = sorted(ratios)
    return None if ranks is None else (ordered[ranks[0] - 1], ordered[ranks[1] - 1])


def settled(ratios: list[float], band: tuple[float, float] = FIDELITY) -> bool:
    """True when the median's interval lies wholly inside or wholly outside the band."""
    interval = median_interval(ratios)
    return interval is not None and (band[0] <= interval[0] and interval[1] <= band[1]  # inside
                                     or interval[1] < band[0] or interval[0] > band[1])


def settled_rounds(harness: Callable[[], float], plain: Callable[[], dict[str, float | None]],
                   clock: Callable[[], float] = time.monotonic) -> dict[str, list[float]]:
    """Rounds until each clock's ratios are :func:`settled` (or ``MAX_ROUNDS``/``MAX_TIMING_S``)."""
    start, ratios = clock(), timing_rounds(harness, plain, TIMING_ROUNDS)
    while (len(ratios["host"]) < MAX_ROUNDS and clock() - start < MAX_TIMING_S
           and not all(settled(r) for r in ratios.values() if r)):
        count = min(MORE_ROUNDS, MAX_ROUNDS - len(ratios["host"]))
        more = timing_rounds(harness, plain, count, seed=len(ratios["host"]))
        ratios = {key: ratios[key] + more[key] for key in ratios}
    return ratios


def _ratio_check(name: str, ratios: list[float], what: str, detail: str) -> Check:
    ratio = statistics.median(ratios)
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratio,) * 3
    interval = median_interval(ratios)
    ci = f", 95 % CI {interval[0]:.3f}-{interval[1]:.3f}" if interval else ""
    figure = (f"harness / {what} = {ratio:.3f} (median of {len(ratios)} interleaved rounds{ci}, "
              f"IQR {q1:.3f}-{q3:.3f})")
    return Check(name, _ratio_status(ratio, FIDELITY), figure, detail, {"ratios": ratios})


def check_timing(suite: Suite) -> list[Check]:
    """Harness / plain loop on one GEMM, interleaved: median ratio in 0.98-1.02 per clock."""
    adapter, op = _gemm(suite)
    for _ in range(10):
        op()
    # the seeds' fixed protocol: exactly one warm-up and the plain loop's number of timed calls
    budget = BenchBudget(warmup=1, min_iters=ROUND_ITERS, max_iters=ROUND_ITERS,
                         max_time_s=120.0, protocol="fixed")

    def harness() -> float:
        return run_bench(op, adapter, budget, noise_threshold=float("inf")).latency.median_ms

    # the plain loop makes the harness's untimed calls too: with one call fewer to refill the caches
    # other processes evicted, it ran 2-3 % slower on a loaded host (median ratio 0.975)
    def plain() -> dict[str, float | None]:
        return plain_loops(adapter, op, ROUND_ITERS, untimed=1 + budget.warmup)

    threads = torch.get_num_threads()
    if suite.device == "cpu":  # one thread: threads waiting on each other on a shared host is noise
        torch.set_num_threads(1)
    try:
        with quiet_logger("ascendbench.bench"):  # no drift warning per 7-call round
            ratios = settled_rounds(harness, plain)
    finally:
        torch.set_num_threads(threads)
    detail = (f"{suite.sizes.gemm}^3 {suite.sizes.gemm_dtype} GEMM, {ROUND_ITERS} calls a method a "
              "round")
    checks = [_ratio_check("timing (host clock)", ratios["host"], "plain host-clock loop", detail)]
    if ratios["event"]:
        checks.append(_ratio_check("timing (device events)", ratios["event"], "device-event loop",
                                   detail))
    else:
        checks.append(Check("timing (device events)", "SKIP", "n/a",
                            f"{suite.device} has no device events"))
    return checks


def _gemm_job_args(rows: int, cols: int, inner: int, dtype: str) -> list[str]:
    return ["model=gemm", f"dtype={dtype}", "baseline.enabled=false",
            f"model.task.input_shape=[{rows},{inner}]", f"model.loader.module.in_features={inner}",
            f"model.loader.module.out_features={cols}", "bench.warmup=3", "bench.iters=20",
            "artifacts.tensors=false", "artifacts.media=false"]


def check_mfu(suite: Suite) -> list[Check]:
    """A GEMM job: FLOPs counted == 2*M*N*K exactly; MFU >= 50 % where the device has a peak."""
    n, dtype = suite.sizes.gemm, suite.sizes.gemm_dtype
    code, records, tail = suite.jobs("mfu", _gemm_job_args(n, n, n, dtype))
    if code != 0 or not records or records[0].get("status") != "ok":
        return [Check("mfu", "FAIL", "job failed", tail[-600:])]
    flops = records[0]["bench"]["flops"]
    if flops.get("achieved_tflops") is None:  # counting off or failed: the section says why
        return [Check("mfu", "FAIL", "no FLOP count", f"bench.flops: {json.dumps(flops)[:300]}")]
    exact = flops.get("per_call") == 2 * n ** 3
    mfu, tflops = flops.get("mfu"), flops.get("achieved_tflops")
    figure = f"{flops.get('per_call')} FLOP/call (2*M*N*K = {2 * n ** 3}); {tflops:.4g} TFLOP/s"
    if mfu is None:
        return [Check("mfu", "PASS" if exact else "FAIL",
                      figure + "; MFU n/a (no peak for this device/dtype)")]
    why = ("" if exact else "the FLOP count is wrong; ") + ("" if mfu >= MFU_FLOOR else (
        "MFU below 50 %: the timing, the FLOP count or the peak table is off"))
    return [Check("mfu", "PASS" if exact and mfu >= MFU_FLOOR else "FAIL",
                  f"{figure}; MFU {100 * mfu:.1f} % of {flops.get('peak_tflops')}", why,
                  {"record": records[0]["bench"]})]


def check_memory(suite: Suite) -> list[Check]:
    """The harness' peak allocated memory against the runtime's own counter around the same call."""
    if suite.device == "cpu":
        return [Check("memory", "SKIP", "n/a",
                      "the CPU has no allocator counters (the record keeps peak RSS)")]
    adapter, op = _gemm(suite)
    bench_cfg = {"enabled": True, "warmup": 1, "iters": 5, "min_iters": 5, "max_iters": 5,
                 "min_time_s": 0.0, "max_time_s": 60.0, "events": True, "phases": False,
                 "flops": {"enabled": False}}
    _, section = measure(op, adapter, bench_cfg, Workload(suite.sizes.gemm_dtype))
    adapter.reset_peak_memory()
    op()
    adapter.synchronize()
    own = adapter.runtime.max_memory_allocated(adapter.index) / 2**20
    harness = section["memory"]["peak_allocated_mb"]
    ratio = harness / own if own else None
    return [Check("memory", _ratio_status(ratio, MEMORY_BAND),
                  f"record {harness:.1f} MB / runtime counter {own:.1f} MB = {ratio:.3f}")]


def check_oom_sweep(suite: Suite) -> list[Check]:
    """A 3-job sweep whose middle job cannot fit: it fails, the others are ok."""
    n, rows = 1024, suite.sizes.oom_rows
    middle = f"[{rows},{n}]" if rows else "[7,3]"  # CPU: a shape the layer rejects (no real OOM)
    args = [a for a in _gemm_job_args(n, rows or n, n, suite.sizes.gemm_dtype)
            if not a.startswith("model.task.input_shape")]
    args.append(f"model.task.input_shape=[{n},{n}],{middle},[{n + 8},{n}]")
    _, records, tail = suite.jobs("oom_sweep", args)
    statuses = {tuple(r["config"]["model"]["task"]["input_shape"]):
                (r["status"], (r.get("error") or {}).get("reason")) for r in records}
    big = statuses.get(tuple(int(x) for x in middle.strip("[]").split(",")))
    others = [v for v in statuses.values() if v is not big]
    ok = (len(records) == 3 and big is not None and big[0] == "failed"
          and (not rows or big[1] == "oom") and all(s == ("ok", None) for s in others))
    return [Check("oom_sweep", "PASS" if ok else "FAIL",
                  f"statuses {sorted(statuses.values(), key=str)}", "" if ok else tail[-600:])]


def check_accuracy(suite: Suite) -> list[Check]:
    """FLUX.2-small-decoder per dtype and preset: every job ok, float32 PASS, verdicts listed."""
    sizes = suite.sizes
    args = [f"model={sizes.model}", "dtype=" + ",".join(sizes.dtypes),
            "preset=" + ",".join(sizes.presets), "bench.max_time_s=10", "artifacts.media=false"]
    if suite.device == "cpu":
        args += ["preset.height=32", "preset.width=32"]
    _, records, tail = suite.jobs("accuracy", args)
    rows = [f"{r['config']['preset']['name']}/{r['config']['dtype']['name']}: {r.get('verdict')}"
            for r in records]
    all_ok = (len(records) == len(sizes.dtypes) * len(sizes.presets)
              and all(r["status"] == "ok" for r in records))
    float32_pass = all(r.get("verdict") == "PASS" for r in records
                       if r["config"]["dtype"]["name"] == "float32")
    status = "PASS" if all_ok and float32_pass else "FAIL"
    return [Check("accuracy", status, "; ".join(rows) or "no records",
                  "" if status == "PASS" else tail[-600:])]


def cards_verdict(records: list[dict[str, Any]], notes: list[dict[str, Any]],
                  jobs: int) -> tuple[bool, str]:
    """Every job ok with a card note; a worker keeps one card; distinct workers, distinct cards."""
    by_pid: dict[Any, set[str]] = {}
    for note in notes:
        by_pid.setdefault(note.get("pid"), set()).add(str(note.get("card")))
    held = list(by_pid.values())
    oks = sum(r.get("status") == "ok" for r in records)
    ok = (len(records) == jobs == oks == len(notes) and all(len(cards) == 1 for cards in held)
          and len(set().union(*held)) == len(held))
    pairs = ", ".join(f"{pid}:{'/'.join(sorted(c))}" for pid, c in by_pid.items()) or "none noted"
    return ok, f"{len(records)} job(s) ok={oks}, workers->cards {pairs}"


def _card_args(cards: list[str], n_jobs: int, seeds: int) -> list[str]:
    return ["hydra/launcher=joblib_cards", f"hydra.launcher.n_jobs={n_jobs}",
            f"hydra.callbacks.cards.cards=[{','.join(cards)}]", "model=tiny_flux2_decoder",
            "baseline.enabled=false", "preset.height=32", "preset.width=32", "preset.warmup=0",
            "preset.iters=2", "artifacts.tensors=false", "artifacts.media=false",
            "seed=" + ",".join(str(i) for i in range(seeds))]


def check_cards(suite: Suite) -> list[Check]:
    """``joblib_cards`` over the cards present: a card per worker; two workers on one refused."""
    count = 2 if suite.device == "cpu" else device_runtime.load_runtime(suite.device).device_count()
    cards = [str(i) for i in range(count)]
    if not cards:
        return [Check("cards", "FAIL", f"no {suite.device} card found")]
    jobs = max(2, len(cards))
    _, records, tail = suite.jobs("cards", _card_args(cards, len(cards), jobs))
    notes = [json.loads(p.read_text()) for p in sorted((suite.work / "cards").glob("*/card.json"))]
    ok, figure = cards_verdict(records, notes, jobs)
    checks = [Check("cards (one per worker)", "PASS" if ok else "FAIL",
                    f"{len(cards)} card(s): {figure}", "" if ok else tail[-600:])]
    code, refused_records, tail = suite.jobs("cards_refused", _card_args(cards[:1], 2, 2))
    refused = code != 0 and not refused_records and "card pool" in tail
    checks.append(Check(
        "cards (two workers, one card)", "PASS" if refused else "FAIL",
        f"exit {code}, {len(refused_records)} record(s)" + (", refused" if refused else ""),
        "" if refused else "expected a refusal naming the card pool, before any job: "
        + tail[-400:]))
    return checks


CHECKS: tuple[Callable[[Suite], list[Check]], ...] = (
    check_verify, check_timing, check_mfu, check_memory, check_oom_sweep, check_accuracy,
    check_cards)
