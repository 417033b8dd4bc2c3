"""The replay reference in the report: each replayed module's local error, job by job.

A job with the replay reference (``baseline.mode`` = ``replay``) has one metric entry per recorded call and
output, ``replay/<module>#<call>[/<output>]/local_rel_err``, in the order the calls finished on the device; the
first whose verdict is FAIL is the first divergent module. Whole-model (end-to-end) errors of other jobs stay
in the accuracy table; this section sits beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import get, num, short, size_label, table, text
from ascendbench.report.tables import record_link

PREFIX, SUFFIX = "metrics.replay/", "/local_rel_err.value"
LABEL = "replay (per-module)"
REPLAY_NOTE = (f"{LABEL}: no whole-model reference ran for this row; hidden MaxDiff / CosSim are the worst local "
               "max abs err / cosine over the replayed modules, each re-run alone on the CPU on the device's own "
               "inputs (see the local-error section); PSNR / SSIM need the whole-model output: \"-\"")
HEADERS = ("module call / output", "local rel err", "rule", "max abs err", "cosine", "verdict")


def replay_entries(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The replay entries of one report row, in the record's (completion) order."""
    entries = []
    for key in row:
        if key.startswith(PREFIX) and key.endswith(SUFFIX) and get(row, key) is not None:
            base = key[: -len(".value")]
            entries.append({"name": key[len(PREFIX): -len(SUFFIX)], "value": row[key],
                            "rule": get(row, f"{base}.rule"), "verdict": get(row, f"{base}.verdict"),
                            "max_abs_err": get(row, f"{base}.max_abs_err"), "cosine": get(row, f"{base}.cosine")})
    return entries


def is_replay(row: Mapping[str, Any]) -> bool:
    """Whether the row's job used the replay reference (no whole-model reference outputs)."""
    return get(row, "baseline.mode") == "replay"


def replay_hidden_cell(row: Mapping[str, Any], metric: str) -> str | None:
    """``worst LABEL`` of ``max_abs_err`` (the largest) or ``cosine`` (the smallest) over the replayed calls,
    for the per-resolution table; ``None`` for a job without the replay reference."""
    if not is_replay(row):
        return None
    values = [e[metric] for e in replay_entries(row) if isinstance(e.get(metric), (int, float))]
    if not values:
        return f"missing {LABEL}"
    return f"{num(max(values) if metric == 'max_abs_err' else min(values))} {LABEL}"


def _job_table(row: Mapping[str, Any], base_dir: Path, heading: str) -> str:
    entries = replay_entries(row)
    first = next((e for e in entries if e["verdict"] == "FAIL"), None)
    title = (f"{heading} {text(get(row, 'job.model'))} {text(get(row, 'job.device'))} {text(get(row, 'job.dtype'))} "
             f"{size_label(row)} ({record_link(row, base_dir)})")
    verdict = (f"First divergent module: **{first['name']}** (local rel err {num(first['value'])}, rule "
               f"{text(first['rule'])})." if first else "No module breaks its local-error rule.")
    body = table(HEADERS, [(e["name"], num(e["value"]), text(e["rule"]), num(e["max_abs_err"]), num(e["cosine"]),
                            text(e["verdict"])) for e in entries]) if entries else "No replayed call was recorded."
    precision = get(row, "compare.precision_choice")
    why = short(get(row, "baseline.reason"), 300) + (f" Precision: {short(precision, 200)}." if precision else "")
    return f"{title}\n\nWhy a replay: {why}\n\n{verdict}\n\n{body}"


def replay_section(rows: Sequence[Mapping[str, Any]], base_dir: Path, heading: str = "###") -> str:
    """Per job with a replay reference: why, the first divergent module and every call's local error."""
    jobs = [r for r in rows if get(r, "baseline.mode") == "replay"]
    if not jobs:
        return ("No job used the replay reference (baseline.reference_mode=replay, or auto where the whole-model "
                "reference does not fit), so there are no per-module local errors.")
    return ("Each module re-run alone on the CPU in float64 (float32 where float64 does not fit in host memory) on "
            "the inputs the device gave it: its local error "
            "(||dev - ref|| / ||ref||, the error it adds itself), judged by the device dtype's unit roundoff times "
            "baseline.replay.margin. End-to-end errors of whole-model references are in the accuracy table.\n\n"
            + "\n\n".join(_job_table(r, base_dir, heading) for r in jobs))
