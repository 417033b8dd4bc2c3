"""The job as an object: the composed config and everything its stages learn, in one place.

Stages (:mod:`ascendbench.job.stages`) read what earlier stages put on the :class:`Job` and set their own
attributes; the record writer only receives the sections they return. Nothing is read back from the
record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import torch
from omegaconf import DictConfig

from ascendbench.errors import AscendBenchError
from ascendbench.job.record import RecordWriter
from ascendbench.precision import Precision

if TYPE_CHECKING:  # the types of the stages' findings; the modules are loaded by the stages that need them
    from ascendbench.baseline.store import Baseline
    from ascendbench.devices.adapter import DeviceAdapter
    from ascendbench.models.base import ModelLoader
    from ascendbench.models.loader import LoadedModel
    from ascendbench.models.pipeline import PipelineSource
    from ascendbench.models.sources import NotFound, ResolvedSource
    from ascendbench.tasks.base import Task


@dataclass
class Job:
    """One composed config on its way to a record.

    Attributes:
        cfg: the composed job config.
        dir: the job directory (``record.json`` and the artifacts are written below it).
        writer: the record writer.
        dry_run: plan only (``dry_run=true``): the stages' ``plan`` methods run instead of ``run``.
        stage: the label of the stage running now (``the device run``...), for failures and interrupts.
        env: the record's ``env`` section.
        adapter: the device adapter (device stage).
        precision: the device dtype, its tolerances and rules, and the reference dtype (device stage).
        loader: the model loader built from ``model.loader`` (load stage).
        loaded: the loaded model with its weights provenance (load stage; real runs).
        weights: the record's ``weights`` section (load stage; real runs).
        found: what the weights lookup found (load stage; dry runs).
        model: the model (real runs) or the model on the ``meta`` device (dry runs), when it could be built.
        task: the task built from ``model.task`` (inputs stage).
        inputs: the task's CPU inputs (inputs stage).
        inputs_info: shape, dtype and SHA256 of each input (inputs stage).
        reference: the CPU reference outputs, a :class:`ascendbench.baseline.store.Baseline` (reference stage).
        replay: the replay reference's plan (:class:`ascendbench.baseline.replay.ReplayPlan`), when it is one.
        outputs: the device outputs, on the CPU (device-run stage).
        metrics: metric entries by name (reference, evaluate and compare stages).
        verdict: the worst verdict of ``metrics``.
        artifacts: artifact paths relative to ``dir``.
        plan: the dry run's plan, assembled from the stages' ``plan`` sections.
        problems: what would make the real job fail (dry runs list them all).
    """

    cfg: DictConfig
    dir: Path
    writer: RecordWriter
    dry_run: bool = False
    stage: str = "the job"
    env: dict[str, Any] = field(default_factory=dict)
    adapter: DeviceAdapter | None = None
    precision: Precision | None = None
    loader: ModelLoader | None = None
    loaded: LoadedModel | None = None
    weights: dict[str, Any] | None = None
    found: ResolvedSource | PipelineSource | NotFound | None = None
    model: Any = None  # a torch.nn.Module, or a diffusers pipeline (no Module), or the meta-device model
    task: Task | None = None
    inputs: dict[str, torch.Tensor] | None = None
    inputs_info: dict[str, Any] = field(default_factory=dict)
    reference: Baseline | None = None  # a SourceBaseline for baseline.source
    replay: Any = None  # the replay reference's capture of the device run (baseline.reference_mode=replay)
    outputs: dict[str, torch.Tensor] | None = None
    placement: dict[str, Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    verdict: str | None = None
    artifacts: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def record(self, section: Mapping[str, Any]) -> None:
        """Write a section to the record now (merged one level deep), e.g. before a long computation."""
        merge_sections(self.writer.data, section)
        self.writer.write()

    def add_plan(self, section: Mapping[str, Any]) -> None:
        """Add a stage's findings to the dry run's plan (merged one level deep: ``memory`` gathers entries)."""
        merge_sections(self.plan, section)

    def warn(self, message: str) -> None:
        """A warning shown in the summary and the report (written to the record at once)."""
        self.writer.warn(message)

    def attempt(self, what: str, fn: Callable[[], Any], default: Any = None) -> Any:
        """Run one part of a plan: an error the real job would also hit becomes a problem (``default`` is
        returned); any other error becomes ``{"unavailable": ...}`` -- a plan is best effort beyond our own
        errors, and says what it could not estimate."""
        try:
            return fn()
        except AscendBenchError as exc:
            self.problems.append(str(exc))
        except Exception as exc:
            return {"unavailable": f"{what}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
        return default

    def relative(self, path: Path | str) -> str:
        """``path`` relative to the job directory, as the record keeps artifact paths."""
        return str(Path(path).relative_to(self.dir))


def merge_sections(into: dict[str, Any], section: Mapping[str, Any]) -> None:
    """Merge a stage's section into ``into``: mappings are merged one level deep, other values replaced."""
    for key, value in section.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), Mapping):
            into[key] = {**into[key], **value}
        else:
            into[key] = value
