"""A saved run as the reference (``baseline.source``): another machine's outputs instead of a CPU computation.

``baseline.source`` names a job directory, its ``record.json``, or a bare tensors file (``.safetensors``,
``.npy``, ``.pt``). From a job (directory or record) the reference is that job's device outputs
(``tensors/device.safetensors``), and the job is checked to be the same workload first: model, task, preset
sizes, seed, the SHA256 of every input and the weights (digest, or the random-init seed). Each differing field
is named in one :class:`~ascendbench.errors.ReferenceMismatchError`, unless ``baseline.source_allow`` lists it;
an accepted difference is recorded with both values. A bare tensors file carries no workload: only output names
and shapes can be checked (after the device run), and the record says so.

When the saved run was an accelerator run that kept its own CPU reference (``tensors/reference.safetensors``),
both device outputs are also measured against that common CPU reference: msprobe's benchmark method, the error
ratio shown in the report's cross-device section.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from ascendbench.baseline.service import Baseline
from ascendbench.baseline.source_checks import check_fit, check_recorded_stats, confined
from ascendbench.errors import ReferenceMismatchError, ReferenceSourceError
from ascendbench.fileio import read_regular
from ascendbench.precision import dtype_name

RECORD = "record.json"
DEVICE_TENSORS = "tensors/device.safetensors"
FIELDS = {  # workload field -> where a record keeps it (the names of baseline.source_allow)
    "model": "job.model", "task": "job.task", "sizes": "job.sizes", "seed": "job.seed",
    "inputs_sha256": "inputs.*.sha256", "weights_digest": "weights.digest (or the random-init seed)",
}
BARE_LIMITATION = ("a bare tensors file carries no record: the workload (inputs, weights, task, sizes, seed) "
                   "cannot be checked, only the output names and shapes; pass the job directory to check it")
ACCEPTED = "a job directory (with record.json), its record.json, or a tensors file (.safetensors, .npy, .pt)"
Score = Callable[[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]], Mapping[str, float]]


def weights_identity(weights: Mapping[str, Any] | None) -> str | None:
    """The weights as a comparable string: their digest, or ``random-init seed N`` (a record's ``weights`` or a
    plan's, whose ``action`` says ``random-init``); ``None`` when not known.

    >>> weights_identity({"kind": "random-init", "init_seed": 42})
    'random-init seed 42'
    """
    if not weights:
        return None
    if "random-init" in (weights.get("kind"), weights.get("action")):
        return f"random-init seed {weights.get('init_seed')}"
    return weights.get("digest")


def _sizes(job: Mapping[str, Any]) -> dict[str, Any] | None:
    sizes = job.get("sizes")
    if isinstance(sizes, Mapping):
        return dict(sizes)
    return {k: job[k] for k in ("batch_size", "height", "width", "num_frames", "steps") if k in job} or None


def record_workload(record: Mapping[str, Any]) -> dict[str, Any]:
    """The workload fields (:data:`FIELDS`) of a saved record; ``None`` where the record lacks one."""
    job, inputs = record.get("job") or {}, record.get("inputs") or {}
    return {"model": job.get("model"), "task": job.get("task"), "sizes": _sizes(job), "seed": job.get("seed"),
            "inputs_sha256": {name: entry.get("sha256") for name, entry in inputs.items()} or None,
            "weights_digest": weights_identity(record.get("weights"))}


@dataclass
class JobWorkload:
    """This job's side of the check: the fields a record keeps, from the config, task, inputs and weights.

    Attributes:
        model: ``model.name``.
        task: ``model.task._target_``.
        sizes: the preset sizes the task uses (``task.sizes(preset)``).
        seed: ``seed``.
        inputs_sha256: input name -> SHA256.
        weights_digest: :func:`weights_identity` of the weights (``None`` in a plan that cannot know them).
    """

    model: str
    task: str
    sizes: dict[str, Any]
    seed: int
    inputs_sha256: dict[str, str]
    weights_digest: str | None

    def fields(self) -> dict[str, Any]:
        """Field name -> value, in :data:`FIELDS` order."""
        return {name: getattr(self, name) for name in FIELDS}


def _differ(name: str, theirs: Any, mine: Any) -> bool:
    if name == "sizes":  # only the sizes both sides name (older records name fewer)
        common = set(theirs) & set(mine)
        return not common or any(theirs[k] != mine[k] for k in common)
    return theirs != mine


def compare_workloads(theirs: Mapping[str, Any], mine: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``({field: {"source": x, "job": y}}`` of the fields that differ, the fields that could not be compared).

    >>> compare_workloads({"seed": 1, "task": "T"}, {"seed": 42, "task": "T"})
    ({'seed': {'source': 1, 'job': 42}}, [])
    """
    differing, unknown = {}, []
    for name in (n for n in FIELDS if n in theirs or n in mine):
        a, b = theirs.get(name), mine.get(name)
        if a is None or b is None:
            unknown.append(name)
        elif _differ(name, a, b):
            differing[name] = {"source": a, "job": b}
    return differing, unknown


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if isinstance(value, (dict, list)) else str(value)
    return text if len(text) <= 160 else text[:157] + "..."


def mismatch_message(source: str, differing: Mapping[str, Mapping[str, Any]]) -> str:
    """The one paragraph refusing a saved reference of another workload, naming each differing field."""
    named = "; ".join(f"{name} differs (source {_short(d['source'])}, this job {_short(d['job'])})"
                      for name, d in differing.items())
    return (f"baseline.source={source} is not the same workload as this job: {named}. A saved reference must come "
            "from the same model, task, preset sizes, seed, inputs and weights. Run the source job again with this "
            "job's settings (or change this job's to match), or accept a known difference deliberately with "
            f"baseline.source_allow=[{','.join(differing)}] (allowed: {', '.join(FIELDS)}); it is recorded.")


@dataclass
class SavedRun:
    """A resolved ``baseline.source``: the tensors file and, for a job, its record.

    Attributes:
        given: the path as configured.
        tensors: the file holding the outputs used as the reference.
        record_path: the job's ``record.json`` (``None`` for a bare tensors file).
        record: that record, parsed.
    """

    given: str
    tensors: Path
    record_path: Path | None = None
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``job`` (a directory or record) or ``tensors`` (a bare file)."""
        return "job" if self.record_path is not None else "tensors"

    def origin(self) -> dict[str, Any]:
        """Where the reference came from: machine, device, dtype, record and tensors paths."""
        if self.record_path is None:
            return {"kind": self.kind, "given": self.given, "tensors": str(self.tensors), "limitation": BARE_LIMITATION}
        job, env = self.record.get("job") or {}, self.record.get("env") or {}
        timing = self.record.get("timing") or {}
        return {"kind": self.kind, "given": self.given, "record": str(self.record_path), "tensors": str(self.tensors),
                "host": env.get("hostname"), "device": job.get("device"),
                "device_name": (env.get("device") or {}).get("name"), "dtype": job.get("dtype"),
                "reference_dtype": job.get("reference_dtype"), "verdict": self.record.get("verdict"),
                "finished_at": timing.get("finished_at")}

    def cpu_reference(self) -> Path | None:
        """The saved run's own CPU reference file, when it was an accelerator run that kept one."""
        job, artifacts = self.record.get("job") or {}, self.record.get("artifacts") or {}
        name = artifacts.get("reference_outputs")
        if self.record_path is None or job.get("device") in (None, "cpu") or not name:
            return None
        path = confined(self.record_path.parent, str(name), self.given, "artifacts.reference_outputs")
        return path if path.is_file() else None


def _read_record(path: Path, given: str) -> dict[str, Any]:
    try:
        record = json.loads(read_regular(path))  # a FIFO is refused, never waited on
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReferenceSourceError(f"baseline.source={given}: {path} cannot be read as a record "
                                   f"({type(exc).__name__}: {exc}). Pass {ACCEPTED}.") from exc
    if not isinstance(record, dict) or record.get("status") != "ok" or "plan" in record:
        what = "a dry run" if isinstance(record, dict) and "plan" in record else (
            f"a job with status {record.get('status')!r}" if isinstance(record, dict) else "not a record")
        raise ReferenceSourceError(f"baseline.source={given}: {path} is {what}; only a finished job (status ok) has "
                                   "outputs to serve as a reference. Point it at a job that completed.")
    return record


def _job_run(record_path: Path, given: str) -> SavedRun:
    record = _read_record(record_path, given)
    artifacts = record.get("artifacts") or {}
    check_fit(given, record)
    tensors = confined(record_path.parent, str(artifacts.get("device_outputs") or DEVICE_TENSORS), given,
                       "artifacts.device_outputs")
    if not tensors.is_file():
        why = artifacts.get("tensors_skipped") or "the file is missing"
        raise ReferenceSourceError(f"baseline.source={given}: the job's device outputs {tensors} are not there "
                                   f"({why}). Run the source job again with artifacts.tensors=true (and a large "
                                   "enough artifacts.max_tensor_mb), or pass a tensors file.")
    return SavedRun(given, tensors, record_path, record)


def resolve_source(given: str) -> SavedRun:
    """The saved run ``baseline.source`` names.

    Raises:
        ReferenceSourceError: the path does not exist or is none of the accepted kinds.
    """
    path = Path(given).expanduser().resolve()  # recorded absolute: the record names the file that served
    if path.is_dir():
        if not (path / RECORD).is_file():
            raise ReferenceSourceError(f"baseline.source={given}: the directory {path} holds no {RECORD}, so it is "
                                       f"not a job directory. Pass {ACCEPTED}.")
        return _job_run(path / RECORD, given)
    if path.is_file():
        return _job_run(path, given) if path.suffix == ".json" else SavedRun(given, path)
    raise ReferenceSourceError(f"baseline.source={given}: {path} does not exist. Pass {ACCEPTED} (copied from the "
                               "machine that ran it).")


def check_workload(run: SavedRun, mine: Mapping[str, Any], allow: Sequence[str]) -> dict[str, Any]:
    """The record's account of the check: fields checked, not checked and accepted (with both values).

    Raises:
        ReferenceMismatchError: a field differs that ``allow`` does not list.
    """
    if run.record_path is None:
        return {"checked": [], "not_checked": list(FIELDS)}
    theirs = record_workload(run.record)
    differing, unknown = compare_workloads(theirs, mine)
    lost = [name for name in unknown if theirs.get(name) is None and mine.get(name) is not None and name not in allow]
    if lost:
        raise ReferenceMismatchError(
            f"baseline.source={run.given}: its record {run.record_path} lacks the workload field(s) "
            f"{', '.join(f'{n} ({FIELDS[n]})' for n in lost)}, so it cannot be shown to be this job's workload. Pass "
            "an unedited record of a finished job, or accept the gap deliberately with "
            f"baseline.source_allow=[{','.join(lost)}]; it is recorded.")
    refused = {name: d for name, d in differing.items() if name not in allow}
    if refused:
        raise ReferenceMismatchError(mismatch_message(run.given, refused))
    return {"checked": [n for n in FIELDS if n not in unknown], "not_checked": unknown,
            "allowed": {name: d for name, d in differing.items()}}


def _read_tensors(run: SavedRun) -> dict[str, torch.Tensor]:
    from ascendbench.compare.files import UnusableInput, read_outputs

    try:
        tensors = read_outputs(run.tensors)
    except UnusableInput as exc:
        raise ReferenceSourceError(f"baseline.source={run.given}: {exc}. Pass {ACCEPTED}.") from exc
    expected = {k: (v.get("shape"), v.get("dtype")) for k, v in (run.record.get("outputs") or {}).items()}
    found = {k: (list(t.shape), dtype_name(t.dtype)) for k, t in tensors.items()}
    if expected and expected != found:
        raise ReferenceSourceError(f"baseline.source={run.given}: {run.tensors} holds {found}, but its record lists "
                                   f"the outputs {expected}; the file was replaced or damaged. Copy the job again.")
    if run.record_path is not None:  # a bare tensors file has no record to check it against
        check_recorded_stats(run.given, run.tensors, run.record, tensors)
    return tensors


class SourceBaseline(Baseline):
    """A :class:`~ascendbench.baseline.service.Baseline` read from a saved run (no layer captures)."""

    def __init__(self, outputs: Mapping[str, torch.Tensor], info: dict[str, Any], run: SavedRun) -> None:
        super().__init__(outputs, info)
        self.run = run


def _precision(tensors: Mapping[str, torch.Tensor]) -> str:
    names = {dtype_name(t.dtype) for t in tensors.values()}
    return names.pop() if len(names) == 1 else "mixed"


def plan_source(given: str, mine: Mapping[str, Any], allow: Sequence[str]) -> dict[str, Any]:
    """The dry run's ``baseline``: where the reference comes from and the workload check; nothing is read but
    the record. Raises as :func:`reference_from_source` does."""
    run = resolve_source(given)
    return {"enabled": True, "source": {**run.origin(), **check_workload(run, mine, allow)}, "cache_hit": None,
            "path": str(run.tensors)}


def reference_from_source(given: str, mine: Mapping[str, Any], allow: Sequence[str]) -> SourceBaseline:
    """The saved run's outputs as this job's reference, after the workload check; ``info`` is the record's
    ``baseline`` section (``source``: origin and check; ``precision``: the dtype of the saved outputs).

    Raises:
        ReferenceSourceError: the source cannot be found or read.
        ReferenceMismatchError: it is another workload (see :func:`check_workload`).
    """
    run = resolve_source(given)
    block = {**run.origin(), **check_workload(run, mine, allow)}
    tensors = _read_tensors(run)
    block["outputs_dtype"] = {name: dtype_name(t.dtype) for name, t in tensors.items()}
    return SourceBaseline(tensors, {"source": block, "precision": _precision(tensors), "cache_hit": None,
                                    "computed": False}, run)


def check_outputs(reference: SourceBaseline, outputs: Mapping[str, torch.Tensor]) -> None:
    """The saved outputs and this job's must have the same names and shapes (all a bare file allows to check).

    Raises:
        ReferenceMismatchError: naming the outputs that differ.
    """
    problems = [f"{name}: source {list(reference[name].shape) if name in reference else 'missing'}, this job "
                f"{list(outputs[name].shape) if name in outputs else 'missing'}"
                for name in sorted(set(reference) | set(outputs))
                if name not in reference or name not in outputs or reference[name].shape != outputs[name].shape]
    if problems:
        raise ReferenceMismatchError(f"baseline.source={reference.run.given}: the saved outputs do not match this "
                                     f"job's ({'; '.join(problems)}). The source ran another workload or model; "
                                     "pass a saved run of this one.")


def benchmark(reference: SourceBaseline, outputs: Mapping[str, torch.Tensor], score: Score) -> dict[str, Any]:
    """msprobe's benchmark method: this job's and the saved run's errors against the saved run's own CPU
    reference (``score`` gives metric name -> value), or why they cannot be formed."""
    path = reference.run.cpu_reference()
    if path is None:
        device = reference.info["source"].get("device")
        why = ("the saved run is itself a CPU run: this job's metrics are already against a CPU output"
               if device == "cpu" else "the saved run kept no CPU reference (tensors/reference.safetensors)")
        return {"skipped": why}
    from safetensors.torch import load_file

    cpu = load_file(str(path))
    return {"cpu_reference": str(path), "cpu_reference_dtype": reference.info["source"].get("reference_dtype"),
            "reference_device": reference.info["source"].get("device"), "device": dict(score(cpu, outputs)),
            "reference": dict(score(cpu, reference))}
