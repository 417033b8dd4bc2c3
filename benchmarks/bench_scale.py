"""Real-size CPU references: estimated vs measured peak memory and wall time, side by side.

Opt-in (it takes minutes on a small host): `ASCENDBENCH_SCALE=1 make bench`, or run this file
directly. Each workload is a random-initialised real architecture (FLUX.2-small-decoder at
256/512/1024 px, the LTX VAE at the mini/balanced video sizes). For each, the reference's memory is
estimated as `dry_run` does (on the meta device, bounded in float64, plus the child process's
imports) and the reference is then computed for real in its child process, one at a time; the
child's peak RSS comes from ``wait4``.

    ASCENDBENCH_SCALE=1 python benchmarks/bench_scale.py
        [--only flux2_512] [--precision float64] [--estimate-only]

Measured on the 2-core / 24 GB development host (float64, random init; estimate vs peak RSS of the
child): FLUX.2-small-decoder 256 px 1.95 vs 2.06 GB (62 s); 512 px 2.78 vs 2.88 GB (244 s); 1024 px
6.34 vs 6.46 GB (323 s) -- unbounded, the 1024 px float64 reference was estimated at 19.7 GB and
refused.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from ascendbench.baseline.memory import HostBudget, estimate_reference
from ascendbench.baseline.service import ReferenceQuery, get_or_compute
from ascendbench.precision import REFERENCE_DTYPES
from ascendbench.tasks.inputs import describe

OPT_IN = "ASCENDBENCH_SCALE"


@dataclass(frozen=True)
class Workload:
    """One real-size reference: a name and the config overrides that make it."""

    name: str
    overrides: tuple[str, ...]


WORKLOADS = (
    Workload("flux2_256", ("model=flux2_small_decoder", "preset=mini")),
    Workload("flux2_512", ("model=flux2_small_decoder", "preset=balanced")),
    Workload("flux2_1024", ("model=flux2_small_decoder", "preset=quality")),
    Workload("ltx_vae_mini", ("model=ltx_video_vae", "preset=mini")),
    Workload("ltx_vae_balanced", ("model=ltx_video_vae", "preset=balanced")),
)


def _config(workload: Workload, cache_dir: Path):
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
            return compose(
                config_name="config",
                overrides=[
                    *workload.overrides,
                    "model.weights=random",
                    "device=cpu",
                    f"baseline.cache_dir={cache_dir}",
                    "baseline.cache=false",
                ],
            )
    finally:
        GlobalHydra.instance().clear()


def measure(
    workload: Workload, precision: torch.dtype, work_dir: Path, compute: bool = True
) -> dict:
    """Estimate, then compute (unless ``compute`` is false), one reference; returns the row of the
    table."""
    cfg = _config(workload, work_dir / "cache")
    loader, task = instantiate(cfg.model.loader), instantiate(cfg.model.task)
    with torch.device("meta"):
        meta = loader.load(None, "random", int(cfg.model.init_seed), None).module
    inputs = task.make_inputs(cfg.preset, int(cfg.seed))
    estimate = estimate_reference(meta, task, inputs, precision, HostBudget(parent_loaded=True))
    row = {
        "workload": workload.name,
        "inputs": " ".join(f"{list(t.shape)}" for t in inputs.values()),
        "estimate_mb": estimate["reference_process_mb"],
        "measured_mb": None,
        "ratio": None,
        "wall_s": 0.0,
    }
    if not compute:
        return row
    weights = {"kind": "random-init", "init_seed": int(cfg.model.init_seed)}
    query = ReferenceQuery(
        cfg, task, inputs, precision, weights, describe(inputs), log_dir=work_dir / workload.name
    )
    start = time.perf_counter()
    info = get_or_compute(query).info
    measured = info.get("peak_rss_mb")
    return {
        **row,
        "measured_mb": measured,
        "ratio": None if not measured else row["estimate_mb"] / measured,
        "wall_s": time.perf_counter() - start,
    }


def _row(row: dict) -> str:
    ratio = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}"
    measured = "n/a" if row["measured_mb"] is None else f"{row['measured_mb']:.0f}"
    return (
        f"{row['workload']:<18} {row['inputs']:<24} {row['estimate_mb']:>9.0f} {measured:>9} "
        f"{ratio:>6} {row['wall_s']:>8.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the workloads (or ``--only`` some) one after the other and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", nargs="*", help="workload names: " + ", ".join(w.name for w in WORKLOADS)
    )
    parser.add_argument("--precision", default="float64", choices=sorted(REFERENCE_DTYPES))
    parser.add_argument(
        "--estimate-only", action="store_true", help="print the estimates, compute nothing"
    )
    args = parser.parse_args(argv)
    if os.environ.get(OPT_IN) != "1" and not (args.only or args.estimate_only):
        print(f"bench_scale: skipped (takes minutes; set {OPT_IN}=1 to run it)")
        return 0
    chosen = [w for w in WORKLOADS if not args.only or w.name in args.only]
    print(
        f"CPU reference in {args.precision}: estimate (dry run) vs measured peak RSS of the "
        "reference process"
    )
    print(
        f"{'workload':<18} {'inputs':<24} {'est. MB':>9} {'peak MB':>9} {'ratio':>6} {'wall s':>8}"
    )
    with tempfile.TemporaryDirectory(prefix="ascendbench-scale-") as tmp:
        for workload in chosen:
            row = measure(
                workload, REFERENCE_DTYPES[args.precision], Path(tmp), not args.estimate_only
            )
            print(_row(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
