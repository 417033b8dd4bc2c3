"""What a saved run (``baseline.source``) must prove before it is a reference: data written by someone else.

- Every path its record names (``artifacts.device_outputs``, ``artifacts.reference_outputs``) resolves, links
  included, inside the saved job's own directory: an absolute or ``../`` path is refused, never read.
- Its outputs file holds what its record says it held: the record's ``outputs`` statistics (mean, std, first
  and last values) are recomputed from the file; another tensor of the same shape and dtype is refused.
- It is fit to judge by: a run whose own verdict is FAIL is refused, and so is a CPU run in a low precision
  (float16 / bfloat16): it is not "a CPU reference", only another low-precision output.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import torch

from ascendbench.errors import ReferenceSourceError
from ascendbench.tasks.inputs import tensor_stats

LOW_PRECISION = ("float16", "bfloat16")
STAT_KEYS = ("mean", "std", "first", "last")
REL_TOL = 1e-9  # float64 statistics of the same values, summed perhaps in another order on another machine


def confined(job_dir: Path, name: str, given: str, what: str) -> Path:
    """``job_dir / name`` resolved (symbolic links followed); refused unless it stays inside ``job_dir``.

    Raises:
        ReferenceSourceError: the path leaves the saved job's directory.
    """
    root = job_dir.resolve()
    path = (root / name).resolve()
    if path != root and root not in path.parents:
        raise ReferenceSourceError(f"baseline.source={given}: its record names {what} {name!r}, which resolves to "
                                   f"{path}, outside the saved job's directory {root}. A saved run's files must lie "
                                   "inside its own directory; copy the whole job directory, unchanged.")
    return path


def _same(recorded: Any, found: Any) -> bool:
    if isinstance(recorded, list) and isinstance(found, list):
        return len(recorded) == len(found) and all(_same(a, b) for a, b in zip(recorded, found, strict=True))
    if isinstance(recorded, (int, float)) and isinstance(found, (int, float)):
        if math.isnan(recorded) or math.isnan(found):
            return math.isnan(recorded) and math.isnan(found)
        return math.isclose(recorded, found, rel_tol=REL_TOL, abs_tol=1e-300)
    return recorded == found


def check_recorded_stats(given: str, path: Path, record: Mapping[str, Any],
                         tensors: Mapping[str, torch.Tensor]) -> None:
    """The statistics of each tensor read from ``path`` equal those its record kept of the job's outputs.

    Raises:
        ReferenceSourceError: naming the output and the statistic that differ.
    """
    outputs = record.get("outputs") if isinstance(record.get("outputs"), Mapping) else {}
    for name, tensor in tensors.items():
        entry = outputs.get(name)
        if not isinstance(entry, Mapping) or not all(key in entry for key in STAT_KEYS):
            raise ReferenceSourceError(
                f"baseline.source={given}: its record keeps no statistics ({', '.join(STAT_KEYS)}) of the output "
                f"{name!r} in {path}, so the file cannot be shown to be the one the job wrote. Copy the job "
                "directory again, unedited (or pass the tensors file alone: then only names and shapes are checked).")
        found = tensor_stats(tensor)
        differ = [key for key in STAT_KEYS if not _same(entry[key], found[key])]
        if differ:
            key = differ[0]
            raise ReferenceSourceError(
                f"baseline.source={given}: {path} holds {name!r} with {key} {found[key]}, but its record kept {key} "
                f"{entry[key]} of that output (differing: {', '.join(differ)}); the file was replaced or damaged. "
                "Copy the job directory again from the machine that ran it.")


def check_fit(given: str, record: Mapping[str, Any]) -> None:
    """A saved run that failed its own accuracy check, or a CPU run in float16/bfloat16, is no reference.

    Raises:
        ReferenceSourceError: saying which, and what to pass instead.
    """
    job = record.get("job") if isinstance(record.get("job"), Mapping) else {}
    if record.get("verdict") == "FAIL":
        raise ReferenceSourceError(f"baseline.source={given}: the saved run's own verdict is FAIL (its outputs "
                                   "failed their accuracy check), so they cannot judge this job. Pass a saved run "
                                   "whose verdict is PASS or WARN, or drop baseline.source for a CPU reference.")
    outputs = record.get("outputs") if isinstance(record.get("outputs"), Mapping) else {}
    low = [n for n, e in outputs.items() if isinstance(e, Mapping) and e.get("dtype") in LOW_PRECISION]
    if job.get("device") == "cpu" and low and job.get("dtype") not in LOW_PRECISION:
        raise ReferenceSourceError(f"baseline.source={given}: the saved run says CPU {job.get('dtype')}, but its "
                                   f"outputs {', '.join(low)} are {outputs[low[0]].get('dtype')}: the record "
                                   "contradicts itself. Copy the job directory again, unedited.")
    if job.get("device") == "cpu" and job.get("dtype") in LOW_PRECISION:
        raise ReferenceSourceError(f"baseline.source={given}: the saved run is a CPU run in {job.get('dtype')}, a "
                                   "low-precision output, not a CPU reference. Pass a CPU float32 (or float64) run, "
                                   "an accelerator run to compare against, or drop baseline.source.")
