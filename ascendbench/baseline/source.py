"""A saved run as the reference (``baseline.source``; docs/accuracy.md)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

import ascendbench
from ascendbench.baseline.store import Baseline
from ascendbench.compare.files import UnusableInput, read_outputs
from ascendbench.errors import ReferenceMismatchError, ReferenceSourceError
from ascendbench.fileio import read_regular
from ascendbench.precision import dtype_name
from ascendbench.tasks.inputs import tensor_sha256, tensor_stats

RECORD = "record.json"
DEVICE_TENSORS = "tensors/device.safetensors"
FIELDS = {  # workload field -> where a record keeps it (the names of baseline.source_allow)
    "model": "job.model", "task": "job.task", "sizes": "job.sizes", "seed": "job.seed",
    "inputs_sha256": "inputs.*.sha256",
    "weights_digest": "weights.digest (or the random-init seed)",
}
SIZES = ("batch_size", "height", "width", "num_frames", "steps")
BARE_LIMITATION = ("a bare tensors file carries no record: the workload (inputs, weights, task, "
                   "sizes, seed) cannot be checked, only the output names and shapes; pass the job "
                   "directory to check it")
ACCEPTED = ("a job directory (with record.json), its record.json, or a tensors file (.safetensors, "
            ".npy, .pt)")
LOW_PRECISION = ("float16", "bfloat16")
STAT_KEYS = ("mean", "std", "first", "last")
REL_TOL = 1e-9  # float64 statistics of the same values, summed perhaps in another order elsewhere
Tensors = Mapping[str, torch.Tensor]
Score = Callable[[Tensors, Tensors], Mapping[str, float]]


def weights_identity(weights: Mapping[str, Any] | None) -> str | None:
    """A record's or plan's ``weights`` as a comparable digest, or ``random-init seed N``."""
    if not weights:
        return None
    if "random-init" in (weights.get("kind"), weights.get("action")):
        return f"random-init seed {weights.get('init_seed')}"
    return weights.get("digest")


def record_workload(record: Mapping[str, Any]) -> dict[str, Any]:
    """The workload fields (:data:`FIELDS`) of a saved record; ``None`` where it lacks one."""
    job, inputs = record.get("job") or {}, record.get("inputs") or {}
    sizes = job.get("sizes")  # older records keep them beside the other job fields
    sizes = dict(sizes) if isinstance(sizes, Mapping) else (
        {k: job[k] for k in SIZES if k in job} or None)
    return {"model": job.get("model"), "task": job.get("task"), "sizes": sizes,
            "seed": job.get("seed"),
            "inputs_sha256": {name: entry.get("sha256") for name, entry in inputs.items()} or None,
            "weights_digest": weights_identity(record.get("weights"))}


def compare_workloads(theirs: Mapping[str, Any],
                      mine: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``({field: {"source": x, "job": y}}`` of the fields that differ, the ones not comparable)."""
    differing, unknown = {}, []
    for name in (n for n in FIELDS if n in theirs or n in mine):
        a, b = theirs.get(name), mine.get(name)
        if a is None or b is None:
            unknown.append(name)
            continue
        if name == "sizes":  # only the sizes both sides name (older records name fewer)
            common = set(a) & set(b)
            differ = not common or any(a[k] != b[k] for k in common)
        else:
            differ = a != b
        if differ:
            differing[name] = {"source": a, "job": b}
    return differing, unknown


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if isinstance(value, (dict, list)) else str(value)
    return text if len(text) <= 160 else text[:157] + "..."


def confined(job_dir: Path, name: str, given: str, what: str) -> Path:
    """``job_dir / name`` resolved (links followed), refused unless it stays inside ``job_dir``."""
    root = job_dir.resolve()
    path = (root / name).resolve()
    if path != root and root not in path.parents:
        raise ReferenceSourceError(
            f"baseline.source={given}: its record names {what} {name!r}, which resolves to "
            f"{path}, outside the saved job's directory {root}. A saved run's files must lie "
            "inside its own directory; copy the whole job directory, unchanged.")
    return path


@dataclass
class SavedRun:
    """A resolved ``baseline.source``: the tensors file and, for a job, its record."""

    given: str
    tensors: Path
    record_path: Path | None = None
    record: dict[str, Any] = field(default_factory=dict)

    def origin(self) -> dict[str, Any]:
        """Where the reference came from: machine, device, dtype, record and tensors paths."""
        if self.record_path is None:
            return {"kind": "tensors", "given": self.given, "tensors": str(self.tensors),
                    "limitation": BARE_LIMITATION}
        job, env = self.record.get("job") or {}, self.record.get("env") or {}
        return {"kind": "job", "given": self.given, "record": str(self.record_path),
                "tensors": str(self.tensors), "host": env.get("hostname"),
                "device": job.get("device"), "device_name": (env.get("device") or {}).get("name"),
                "dtype": job.get("dtype"), "reference_dtype": job.get("reference_dtype"),
                "verdict": self.record.get("verdict"),
                "finished_at": (self.record.get("timing") or {}).get("finished_at")}

    def cpu_reference(self) -> Path | None:
        """The saved run's own CPU reference file, when it was an accelerator run that kept one."""
        job = self.record.get("job") or {}
        name = (self.record.get("artifacts") or {}).get("reference_outputs")
        if self.record_path is None or job.get("device") in (None, "cpu") or not name:
            return None
        path = confined(self.record_path.parent, str(name), self.given,
                        "artifacts.reference_outputs")
        return path if path.is_file() else None


def _check_fit(given: str, record: Mapping[str, Any]) -> None:
    """A run that failed its own check, or a CPU run in a half dtype, is no reference."""
    job = record.get("job") if isinstance(record.get("job"), Mapping) else {}
    outputs = record.get("outputs") if isinstance(record.get("outputs"), Mapping) else {}
    low = [n for n, e in outputs.items()
           if isinstance(e, Mapping) and e.get("dtype") in LOW_PRECISION]
    on_cpu, dtype = job.get("device") == "cpu", job.get("dtype")
    if record.get("verdict") == "FAIL":
        why = ("the saved run's own verdict is FAIL (its outputs failed their accuracy check), "
               "so they cannot judge this job. Pass a saved run whose verdict is PASS or WARN, or "
               "drop baseline.source for a CPU reference.")
    elif on_cpu and low and dtype not in LOW_PRECISION:
        why = (f"the saved run says CPU {dtype}, but its outputs {', '.join(low)} are "
               f"{outputs[low[0]].get('dtype')}: the record contradicts itself. Copy the job "
               "directory again, unedited.")
    elif on_cpu and dtype in LOW_PRECISION:
        why = (f"the saved run is a CPU run in {dtype}, a low-precision output, not a CPU "
               "reference. Pass a CPU float32 (or float64) run, an accelerator run to compare "
               "against, or drop baseline.source.")
    else:
        return
    raise ReferenceSourceError(f"baseline.source={given}: {why}")


def _job_run(path: Path, given: str) -> SavedRun:
    try:
        record = json.loads(read_regular(path))  # a FIFO is refused, never waited on
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReferenceSourceError(f"baseline.source={given}: {path} cannot be read as a record "
                                   f"({type(exc).__name__}: {exc}). Pass {ACCEPTED}.") from exc
    schema, mine = (record.get("schema") if isinstance(record, dict) else None,
                    ascendbench.SCHEMA_VERSION)
    if isinstance(schema, int) and schema > mine:
        raise ReferenceSourceError(
            f"baseline.source={given}: {path} is a record of schema {schema}, written by a newer "
            f"ascendbench (this one reads schema {mine}): its fields may not mean what this "
            "version checks. Use the ascendbench that wrote it, or upgrade this one.")
    if not isinstance(record, dict) or record.get("status") != "ok" or "plan" in record:
        what = "not a record" if not isinstance(record, dict) else (
            "a dry run" if "plan" in record else f"a job with status {record.get('status')!r}")
        raise ReferenceSourceError(f"baseline.source={given}: {path} is {what}; only a finished "
                                   "job (status ok) has outputs to serve as a reference. Point it "
                                   "at a job that completed.")
    artifacts = record.get("artifacts") or {}
    _check_fit(given, record)
    tensors = confined(path.parent, str(artifacts.get("device_outputs") or DEVICE_TENSORS), given,
                       "artifacts.device_outputs")
    if not tensors.is_file():
        why = artifacts.get("tensors_skipped") or "the file is missing"
        raise ReferenceSourceError(
            f"baseline.source={given}: the job's device outputs {tensors} are not there ({why}). "
            "Run the source job again with artifacts.tensors=true (and a large enough "
            "artifacts.max_tensor_mb), or pass a tensors file.")
    return SavedRun(given, tensors, path, record)


def resolve_source(given: str) -> SavedRun:
    """The saved run ``baseline.source`` names (a :class:`ReferenceSourceError` otherwise)."""
    path = Path(given).expanduser().resolve()  # absolute: the record names the file that served
    if path.is_dir():
        if not (path / RECORD).is_file():
            raise ReferenceSourceError(f"baseline.source={given}: the directory {path} holds no "
                                       f"{RECORD}, so it is not a job directory. Pass {ACCEPTED}.")
        return _job_run(path / RECORD, given)
    if path.is_file():
        return _job_run(path, given) if path.suffix == ".json" else SavedRun(given, path)
    raise ReferenceSourceError(f"baseline.source={given}: {path} does not exist. Pass {ACCEPTED} "
                               "(copied from the machine that ran it).")


def check_workload(run: SavedRun, mine: Mapping[str, Any], allow: Sequence[str]) -> dict[str, Any]:
    """The record's account of the workload check; a :class:`ReferenceMismatchError` if refused."""
    if run.record_path is None:
        return {"checked": [], "not_checked": list(FIELDS)}
    theirs = record_workload(run.record)
    differing, unknown = compare_workloads(theirs, mine)
    lost = [n for n in unknown
            if theirs.get(n) is None and mine.get(n) is not None and n not in allow]
    if lost:
        raise ReferenceMismatchError(
            f"baseline.source={run.given}: its record {run.record_path} lacks the workload "
            f"field(s) {', '.join(f'{n} ({FIELDS[n]})' for n in lost)}, so it cannot be shown to "
            "be this job's workload. Pass an unedited record of a finished job, or accept the gap "
            f"deliberately with baseline.source_allow=[{','.join(lost)}]; it is recorded.")
    refused = {name: d for name, d in differing.items() if name not in allow}
    if refused:
        named = "; ".join(f"{name} differs (source {_short(d['source'])}, this job "
                          f"{_short(d['job'])})" for name, d in refused.items())
        raise ReferenceMismatchError(
            f"baseline.source={run.given} is not the same workload as this job: {named}. A saved "
            "reference must come from the same model, task, preset sizes, seed, inputs and "
            "weights. Run the source job again with this job's settings (or change this job's to "
            "match), or accept a known difference deliberately with "
            f"baseline.source_allow=[{','.join(refused)}] (allowed: {', '.join(FIELDS)}); it is "
            "recorded.")
    return {"checked": [n for n in FIELDS if n not in unknown], "not_checked": unknown,
            "allowed": dict(differing)}


def _same(recorded: Any, found: Any) -> bool:
    if isinstance(recorded, list) and isinstance(found, list):
        return len(recorded) == len(found) and all(map(_same, recorded, found))
    if isinstance(recorded, (int, float)) and isinstance(found, (int, float)):
        if math.isnan(recorded) or math.isnan(found):
            return math.isnan(recorded) and math.isnan(found)
        return math.isclose(recorded, found, rel_tol=REL_TOL, abs_tol=1e-300)
    return recorded == found


def _read(given: str, path: Path) -> dict[str, torch.Tensor]:
    try:
        return read_outputs(path)
    except UnusableInput as exc:  # a lying header: safetensors' own words kept
        raise ReferenceSourceError(f"baseline.source={given}: {exc}. Copy the saved run again, "
                                   f"or pass {ACCEPTED}.") from exc


def _read_tensors(run: SavedRun) -> dict[str, torch.Tensor]:
    """The saved outputs, matching their record's shapes, dtypes and (from a job) statistics."""
    given, path = run.given, run.tensors
    tensors = _read(given, path)
    outputs = run.record.get("outputs") if isinstance(run.record.get("outputs"), Mapping) else {}
    expected = {k: (v.get("shape"), v.get("dtype")) for k, v in outputs.items()}
    found = {k: (list(t.shape), dtype_name(t.dtype)) for k, t in tensors.items()}
    if expected and expected != found:
        raise ReferenceSourceError(f"baseline.source={given}: {path} holds {found}, but its "
                                   f"record lists the outputs {expected}; the file was replaced "
                                   "or damaged. Copy the job again.")
    for name, tensor in tensors.items() if run.record_path is not None else ():
        entry = outputs.get(name)
        if not isinstance(entry, Mapping) or not all(key in entry for key in STAT_KEYS):
            raise ReferenceSourceError(
                f"baseline.source={given}: its record keeps no statistics "
                f"({', '.join(STAT_KEYS)}) of the output {name!r} in {path}, so the file cannot "
                "be shown to be the one the job wrote. Copy the job directory again, unedited (or "
                "pass the tensors file alone: then only names and shapes are checked).")
        stats = tensor_stats(tensor)
        differ = [key for key in STAT_KEYS if not _same(entry[key], stats[key])]
        if differ:
            key = differ[0]
            raise ReferenceSourceError(
                f"baseline.source={given}: {path} holds {name!r} with {key} {stats[key]}, but its "
                f"record kept {key} {entry[key]} of that output (differing: {', '.join(differ)}); "
                "the file was replaced or damaged. Copy the job directory again from the machine "
                "that ran it.")
    return tensors


def _check_inputs(run: SavedRun) -> None:
    """The inputs file holds the inputs the record names (an edited seed does not pass)."""
    recorded = {name: e.get("sha256") for name, e in (run.record.get("inputs") or {}).items()
                if isinstance(e, Mapping) and e.get("sha256")}
    if run.record_path is None or not recorded:
        return  # a bare file, or a record without inputs (refused unless allowed, then recorded)
    name = str((run.record.get("artifacts") or {}).get("inputs") or "tensors/inputs.safetensors")
    path = confined(run.record_path.parent, name, run.given, "artifacts.inputs")
    tensors = _read(run.given, path) if path.is_file() else {}
    found = {k: tensor_sha256(t) for k, t in tensors.items()}
    differ = sorted(k for k in recorded.keys() | found.keys() if recorded.get(k) != found.get(k))
    if differ:
        raise ReferenceSourceError(
            f"baseline.source={run.given}: its inputs file {path} does not hold the inputs its "
            f"record names ({', '.join(differ)} differ or are missing): the record was edited or "
            "the file replaced, so its outputs may come from other inputs. Copy the job directory "
            "again from the machine that ran it, unedited.")


class SourceBaseline(Baseline):
    """A :class:`~ascendbench.baseline.store.Baseline` from a saved run (no layer captures)."""

    def __init__(self, outputs: Tensors, info: dict[str, Any], run: SavedRun) -> None:
        super().__init__(outputs, info)
        self.run = run


def plan_source(given: str, mine: Mapping[str, Any], allow: Sequence[str]) -> dict[str, Any]:
    """The dry run's ``baseline``: where the reference comes from and the workload check."""
    run = resolve_source(given)
    return {"enabled": True, "source": {**run.origin(), **check_workload(run, mine, allow)},
            "cache_hit": None, "path": str(run.tensors)}


def reference_from_source(given: str, mine: Mapping[str, Any],
                          allow: Sequence[str]) -> SourceBaseline:
    """The saved run's outputs as this job's reference, after the checks."""
    run = resolve_source(given)
    block = {**run.origin(), **check_workload(run, mine, allow)}
    tensors = _read_tensors(run)
    _check_inputs(run)
    block["outputs_dtype"] = {name: dtype_name(t.dtype) for name, t in tensors.items()}
    names = {dtype_name(t.dtype) for t in tensors.values()}
    info = {"source": block, "precision": names.pop() if len(names) == 1 else "mixed",
            "cache_hit": None, "computed": False}
    return SourceBaseline(tensors, info, run)


def check_outputs(reference: SourceBaseline, outputs: Tensors) -> None:
    """The saved outputs and this job's have the same names and shapes (all a bare file allows)."""
    def shape(tensors: Tensors, name: str) -> Any:
        return list(tensors[name].shape) if name in tensors else "missing"

    problems = [f"{name}: source {shape(reference, name)}, this job {shape(outputs, name)}"
                for name in sorted(set(reference) | set(outputs))
                if shape(reference, name) != shape(outputs, name)]
    if problems:
        raise ReferenceMismatchError(
            f"baseline.source={reference.run.given}: the saved outputs do not match this job's "
            f"({'; '.join(problems)}). The source ran another workload or model; pass a saved run "
            "of this one.")


def benchmark(reference: SourceBaseline, outputs: Tensors, score: Score) -> dict[str, Any]:
    """msprobe's benchmark method: both runs' errors against the saved run's CPU reference."""
    path, source = reference.run.cpu_reference(), reference.info["source"]
    if path is None and source.get("device") == "cpu":
        return {"skipped": "the saved run is itself a CPU run: this job's metrics are already "
                           "against a CPU output"}
    if path is None:
        return {"skipped": "the saved run kept no CPU reference (tensors/reference.safetensors)"}
    cpu = _read(reference.run.given, path)
    return {"cpu_reference": str(path), "cpu_reference_dtype": source.get("reference_dtype"),
            "reference_device": source.get("device"), "device": dict(score(cpu, outputs)),
            "reference": dict(score(cpu, reference))}
