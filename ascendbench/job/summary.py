"""The compact summary printed at the end of a job, built only from its record."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from ascendbench.bench.summary import bench_lines
from ascendbench.compare.msprobe import describe
from ascendbench.digits import judged_rule, judged_value, printable

KEY_METRICS = ("mean_rel_err", "max_abs_err", "cosine", "psnr_db")
REPEAT_LIMIT = 60  # a longer skip reason printed before in this process is shortened
_SHOWN_REASONS: set[str] = set()  # the skip reasons printed in this process (a sweep's jobs)


def summary_lines(record: Mapping[str, Any], record_path: Path | str,
                  seen: set[str] | None = None) -> list[str]:
    """The summary as lines of text (control characters escaped); skip reasons shown once."""
    job, weights = record.get("job", {}), record.get("weights") or {}
    lines = [f"model     {job.get('model')}  preset {job.get('preset')}{_sizes(job)}  seed "
             f"{job.get('seed')}",
             f"device    {job.get('device')} (requested {job.get('device_requested')})  dtype "
             f"{job.get('dtype')} (requested {job.get('dtype_requested')})  reference "
             f"{job.get('reference_dtype', 'none')}",
             f"weights   {weights.get('kind')}  "
             f"{weights.get('digest') or 'seed ' + str(weights.get('init_seed'))}"]
    source = (record.get("baseline") or {}).get("source")
    lines += [f"reference {source_label(source)}"] if isinstance(source, Mapping) else []
    lines += _metric_lines(record.get("metrics") or {}, record.get("verdict"), _declared(job), seen)
    lines += bench_lines(record.get("bench") or {}) if record.get("bench") else []
    lines += [ab] if (ab := ab_line(record.get("ab"))) is not None else []
    dumps = (record.get("compare") or {}).get("msprobe")
    lines += [f"msprobe   {describe(dumps)}"] if isinstance(dumps, Mapping) else []
    lines += [f"warning   {w}" for w in record.get("warnings", [])]
    lines.append(f"record    {record_path}")
    return [printable(line) for line in lines]


def ab_line(section: Any) -> str | None:
    """The line of the record's ``ab`` section (``bench.ab=unpatched``), ``None`` without one.
    >>> ab_line({"decision": {"text": "-20.0%, p=0.001, ...: FASTER"}, "speedup_paired": 1.25})
    'A/B       patches vs none, interleaved: -20.0%, p=0.001, ...: FASTER; speed-up x1.25'"""
    decision = section.get("decision") if isinstance(section, Mapping) else None
    if not isinstance(decision, Mapping) or not isinstance(decision.get("text"), str):
        return None
    speedup = section.get("speedup_paired")
    usable = (isinstance(speedup, (int, float)) and not isinstance(speedup, bool)
              and math.isfinite(speedup))
    return (f"A/B       patches vs none, interleaved: {decision['text']}"
            + (f"; speed-up x{speedup:.3g}" if usable else ""))


def source_label(source: Mapping[str, Any]) -> str:
    """A saved reference (``baseline.source``) in a few words: device, dtype, host and record.
    >>> source_label({"kind": "tensors", "tensors": "ref.safetensors"})
    'saved outputs ref.safetensors (names and shapes checked only)'"""
    if source.get("kind") == "tensors":
        return f"saved outputs {source.get('tensors')} (names and shapes checked only)"
    return (f"saved run: {source.get('device')} {source.get('dtype')} on {source.get('host')} "
            f"({source.get('record')})")


def _sizes(job: Mapping[str, Any]) -> str:
    """``  size 32x32x9  steps 2``; a task without an image size names its own sizes."""
    sizes = job.get("sizes") if isinstance(job.get("sizes"), Mapping) else None
    if sizes is not None and "height" not in sizes:
        return "".join(f"  {k} {v}" for k, v in sizes.items() if k != "batch_size")
    if job.get("height") is None or job.get("width") is None:
        return ""
    frames = f"x{job['num_frames']}" if job.get("num_frames") is not None else ""
    steps = f"  steps {job['steps']}" if job.get("steps") is not None else ""
    return f"  size {job['height']}x{job['width']}{frames}{steps}"


def _declared(job: Mapping[str, Any]) -> set[str]:
    primary = job.get("primary") or {}
    output = primary.get("output")
    names = {str(v) for k, v in primary.items() if k != "output"}
    return names | {f"{output}/{n}" for n in names if output and "/" not in n}


def _reason_text(reason: str, seen: set[str] | None) -> str:
    if seen is None:
        return reason
    if reason in seen and len(reason) > REPEAT_LIMIT:
        return reason[:REPEAT_LIMIT].rstrip() + "... (as in the summary above)"
    seen.add(reason)
    return reason


def _metric_lines(metrics: Mapping[str, Any], verdict: str | None, declared: set[str],
                  seen: set[str] | None) -> list[str]:
    """The verdict with key and declared metrics, every metric not passed, the skipped by reason."""
    judged = {k: m for k, m in metrics.items() if isinstance(m, Mapping) and "value" in m}
    shown = [f"{k} {judged_value(k, m)}"
             + (f" [{m['verdict']} {judged_rule(k, m)}]" if m.get("verdict") else "")
             for k, m in judged.items()
             if not k.startswith("layer/") and (k.split("/")[-1] in KEY_METRICS or k in declared)]
    lines = [f"verdict   {verdict or 'n/a'}   " + "; ".join(shown)]
    bad = [f"{k} {judged_value(k, m)} {m['verdict']} ({judged_rule(k, m)})"
           for k, m in judged.items() if m.get("verdict") in ("FAIL", "WARN")]
    if bad:
        lines.append(f"not pass  {len(bad)}: " + "; ".join(bad[:5]) + " ..." * (len(bad) > 5))
    by_reason: dict[str, list[str]] = {}
    for name, entry in metrics.items():
        if isinstance(entry, Mapping) and "skipped" in entry:
            by_reason.setdefault(str(entry["skipped"]), []).append(name)
    lines += [f"skipped   {', '.join(names)}: {_reason_text(reason, seen)}"
              for reason, names in by_reason.items()]
    return lines


def print_summary(record: Mapping[str, Any], record_path: Path | str) -> None:
    """Print the summary block to stdout."""
    lines = summary_lines(record, record_path, _SHOWN_REASONS)
    width = min(100, max(len(line) for line in lines))
    print("\n".join(["=" * width, "ascendbench summary", "-" * width, *lines, "=" * width]),
          flush=True)
