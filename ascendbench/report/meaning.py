"""Which metric answers a report section: the one the job's task declared, never the first name in sort order.

A record carries ``job.primary`` (:meth:`ascendbench.tasks.base.Task.report_declaration`): the primary
output and, per section, the metric that answers it (``error``: the error plot and the dtype ranking;
``psnr`` / ``ssim``: the per-resolution table). Sorting names instead shows the wrong thing: the
tokenizer's random-init control PSNR (``gate/control_psnr_db``) for a pretrained model's reconstruction
PSNR, or a text-to-video job's audio error (``audio/...``) instead of its failing video error.

A record without the declaration (written before it existed) is matched by ``wanted`` names; when the
metrics of several outputs match and none of them is the primary output, the answer is "none": an
ambiguous cell says so rather than picking one.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import get, metric_matches

PRIMARY = "job.primary"


def present_metrics(row: Mapping[str, Any]) -> list[str]:
    """Metric names of the row holding a value (hidden-state ``layer/`` entries excluded)."""
    return [k[len("metrics."):-len(".value")] for k in row if k.startswith("metrics.") and k.endswith(".value")
            and not k.startswith("metrics.layer/") and get(row, k) is not None]


def primary_output(row: Mapping[str, Any]) -> str | None:
    """The output the job's task leads with (``video``, ``reconstruction``, ``image``), if declared."""
    output = get(row, f"{PRIMARY}.output")
    return str(output) if output is not None else None


def declared_metric(row: Mapping[str, Any], section: str) -> tuple[bool, str | None]:
    """``(declared, name)``: whether the task declared ``section``, and the metric name present in the row.

    A declared name without ``/`` is a metric of the primary output (``video/mean_rel_err`` when the job
    had several outputs, ``mean_rel_err`` when only one).
    """
    name = get(row, f"{PRIMARY}.{section}")
    if name is None:
        return False, None
    output, names = primary_output(row), set(present_metrics(row))
    candidates = [str(name)] if "/" in str(name) else ([f"{output}/{name}"] if output else []) + [str(name)]
    return True, next((c for c in candidates if c in names), None)


def section_metric(row: Mapping[str, Any], section: str, wanted: Sequence[str] = ()) -> str | None:
    """The metric answering ``section`` for this row: the declared one, else the one unambiguous match."""
    declared, name = declared_metric(row, section)
    if declared:
        return name
    names, output = present_metrics(row), primary_output(row)
    for want in wanted:
        found = [n for n in names if metric_matches(n, want)]
        exact = [n for n in found if n.rsplit("/", 1)[-1] == want]
        for pool in (exact, found):
            if output:
                pool = [n for n in pool if n.startswith(f"{output}/") or "/" not in n] or pool
            if len(pool) == 1:
                return pool[0]
        if found:
            return None  # several outputs' metrics match and nothing says which one is meant
    return None
