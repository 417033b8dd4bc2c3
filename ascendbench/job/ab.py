"""``bench.ab=unpatched``: the call timed without and with ``model.patches``, interleaved."""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Mapping

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.interleave import Interleaved, InterleavedLoop, Side
from ascendbench.bench.stats import Shift
from ascendbench.config.rules import AB_FIX
from ascendbench.errors import ConfigError
from ascendbench.job.record import write_json_atomic
from ascendbench.patches.registry import build_patch, parse_specs, patches_applied
from ascendbench.progress import quiet_logger

log = logging.getLogger(__name__)

# The regression gate's defaults (conf/report.yaml ``compare.alpha`` and ``compare.min_effect``).
ALPHA = 0.05
MIN_EFFECT = 0.03
MIN_PAIRS = 6


def wanted(job: Any) -> bool:
    """True when the job asks for the A/B of its patches against none (``bench.ab=unpatched``)."""
    return job.cfg.bench.get("ab") == "unpatched"


def check_applied(job: Any, applied: list[Mapping[str, Any]]) -> None:
    """With ``bench.ab=unpatched``, a ConfigError when no patch applied (both sides the same)."""
    if not wanted(job) or any("skipped" not in entry for entry in applied):
        return
    skipped = "; ".join(f"{e.get('name')}: {e.get('skipped')}" for e in applied) or "none named"
    raise ConfigError(
        "bench.ab=unpatched times the model with its model.patches against it without them, but "
        f"no patch applies on {job.adapter.name} in {job.precision.name} ({skipped}), so both "
        f"sides would be the same model; name a patch that applies here (its `devices`), or "
        f"{AB_FIX}.")


def plan_check(job: Any) -> None:
    """:func:`check_applied` for the dry run: which of ``model.patches`` would apply here."""
    if not wanted(job):
        return
    entries: list[dict[str, Any]] = []
    for spec in parse_specs(job.cfg.model.get("patches")):
        reason = None if spec.applies_on(job.adapter.name) else f"not applied on {job.adapter.name}"
        reason = reason or build_patch(spec).skip_reason(job.precision.name)
        entries.append({"name": spec.name, **({"skipped": reason} if reason else {})})
    check_applied(job, entries)


def run_ab(job: Any, call: Callable[[], Any]) -> dict[str, Any]:
    """Time ``call`` (model unpatched) against itself patched; the record's ``ab`` section."""
    specs, adapter, bench_cfg = job.cfg.model.get("patches"), job.adapter, job.cfg.bench
    log.info("A/B: the model without its patches (A) and with them (B), in alternating blocks ...")
    if (graph := str(job.cfg.device.get("compile") or "none")) != "none":
        job.warn(f"bench.ab=unpatched with device.compile={graph}: the patches are applied and "
                 "restored around every block, which a compiled graph may take as a change and "
                 "recompile; the A/B then times compilation too (compare with device.compile=none)")
    loop = InterleavedLoop(adapter, BenchBudget.from_config(bench_cfg),
                           noise_threshold=float(bench_cfg.get("noise_threshold", 0.10)))
    patched = Side("patched", call, context=lambda: patches_applied(
        specs, job.model, adapter.name, job.precision.name))  # applied around every block of B
    with quiet_logger("ascendbench.patches"):  # patches applied and restored around every block
        run = loop.run(Side("unpatched", call), patched)
    items = job.task.items_per_call(job.inputs)
    a, b = (result.to_dict(items, job.task.unit) for result in run.results)
    decision = judge(run)
    log.info("patches vs none, interleaved: %s", decision["text"])
    shift = decision.get("shift")
    section = {"against": "unpatched", "a": a, "b": b, "decision": decision,
               "speedup": run.results[0].latency.median_ms / run.results[1].latency.median_ms,
               "speedup_paired": None if shift is None else 1.0 / (1.0 + shift)}
    return {**section, "records": write_sides(job, section)}


def write_sides(job: Any, section: Mapping[str, Any]) -> dict[str, str]:
    """Each side as a small record ``ab_<side>.json`` next to ``record.json``; side -> path."""
    written = {}
    for key, side in (("a", "unpatched"), ("b", "patched")):
        path = job.dir / f"ab_{side}.json"
        write_json_atomic(path, {"status": "ok", "ab_side": side, "job": job.writer.data.get("job"),
                                 "timing": job.writer.data.get("timing"), "bench": section[key]})
        written[key] = job.relative(path)
    return written


def judge(run: Interleaved) -> dict[str, Any]:
    """The decision on the interleaved run's pairs: B (patched) against A (unpatched), both ways."""
    pairs = run.pairs
    if len(pairs) < MIN_PAIRS:
        text = (f"underpowered: {len(pairs)} pairs < {MIN_PAIRS}; give the A/B more time "
                "(bench.max_time_s, bench.max_iters)")
        return {"verdict": "underpowered", "regressed": False, "faster": False,
                "pairs": len(pairs), "effect": None, "text": text}
    shift = Shift.paired([a for a, _ in pairs], [b for _, b in pairs])
    slower, faster = shift.slower(ALPHA, MIN_EFFECT), shift.faster(ALPHA, MIN_EFFECT)
    verdict = "SLOWER" if slower else "FASTER" if faster else "no significant difference"
    effect, rule = shift.text(ALPHA), f"a one-sided {1 - ALPHA:.0%} bound beyond {MIN_EFFECT:.0%}"
    return {"verdict": verdict, "regressed": slower, "faster": faster, "pairs": len(pairs),
            "effect": effect, "shift": math.expm1(shift.log), "bounds": list(shift.bounds(ALPHA)),
            "alpha": ALPHA, "min_effect": MIN_EFFECT, "text": f"{effect}: {verdict} ({rule})"}
