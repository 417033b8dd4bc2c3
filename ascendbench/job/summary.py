"""The compact summary printed at the end of a job."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ascendbench.bench.summary import bench_lines
from ascendbench.digits import judged_rule, judged_value

KEY_METRICS = ("mean_rel_err", "max_abs_err", "cosine", "psnr_db")


def summary_lines(record: Mapping[str, Any], record_path: Path | str) -> list[str]:
    """The summary as lines of text, built only from the record."""
    job, weights = record.get("job", {}), record.get("weights") or {}
    lines = [
        f"model     {job.get('model')}  preset {job.get('preset')}  seed {job.get('seed')}",
        f"device    {job.get('device')} (requested {job.get('device_requested')})  dtype {job.get('dtype')}"
        f" (requested {job.get('dtype_requested')})  reference {job.get('reference_dtype', 'none')}",
        f"weights   {weights.get('kind')}  {weights.get('digest') or 'seed ' + str(weights.get('init_seed'))}",
    ]
    source = (record.get("baseline") or {}).get("source")
    if isinstance(source, Mapping):
        lines.append(f"reference {source_label(source)}")
    lines += _metric_lines(record.get("metrics") or {}, record.get("verdict"))
    bench = record.get("bench") or {}
    if bench:
        lines += bench_lines(bench)
    lines += [f"warning   {w}" for w in record.get("warnings", [])]
    lines.append(f"record    {record_path}")
    return lines


def source_label(source: Mapping[str, Any]) -> str:
    """A saved reference (``baseline.source``) in a few words: device, dtype, host and record, or the file.

    >>> source_label({"kind": "tensors", "tensors": "ref.safetensors"})
    'saved outputs ref.safetensors (names and shapes checked only)'
    """
    if source.get("kind") == "tensors":
        return f"saved outputs {source.get('tensors')} (names and shapes checked only)"
    return f"saved run: {source.get('device')} {source.get('dtype')} on {source.get('host')} ({source.get('record')})"


def _metric_lines(metrics: Mapping[str, Any], verdict: str | None) -> list[str]:
    """Verdict with the key output metrics, then every metric that did not pass, then skipped ones."""
    judged = {k: m for k, m in metrics.items() if isinstance(m, Mapping) and "value" in m}
    shown = [f"{k} {judged_value(k, m)}" + (f" [{m['verdict']} {judged_rule(k, m)}]" if m.get("verdict") else "")
             for k, m in judged.items() if not k.startswith("layer/") and k.split("/")[-1] in KEY_METRICS]
    lines = [f"verdict   {verdict or 'n/a'}   " + "; ".join(shown)]
    bad = [f"{k} {judged_value(k, m)} {m['verdict']} ({judged_rule(k, m)})" for k, m in judged.items()
           if m.get("verdict") in ("FAIL", "WARN")]
    if bad:
        lines.append(f"not pass  {len(bad)}: " + "; ".join(bad[:5]) + (" ..." if len(bad) > 5 else ""))
    by_reason: dict[str, list[str]] = {}
    for name, entry in metrics.items():
        if isinstance(entry, Mapping) and "skipped" in entry:
            by_reason.setdefault(str(entry["skipped"]), []).append(name)
    lines += [f"skipped   {', '.join(names)}: {reason}" for reason, names in by_reason.items()]
    return lines


def print_summary(record: Mapping[str, Any], record_path: Path | str) -> None:
    """Print the summary block to stdout."""
    lines = summary_lines(record, record_path)
    width = min(100, max(len(line) for line in lines))
    print("=" * width + "\nascendbench summary\n" + "-" * width)
    print("\n".join(lines))
    print("=" * width, flush=True)
