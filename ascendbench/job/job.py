"""The job as an object: the composed config and what its stages learn."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
from omegaconf import DictConfig

from ascendbench.errors import AscendBenchError
from ascendbench.job.record import RecordWriter
from ascendbench.precision import Precision


@dataclass
class Job:
    """One composed config on its way to a record; the stage that learns an attribute sets it."""

    cfg: DictConfig
    dir: Path
    writer: RecordWriter
    dry_run: bool = False  # the stages' plan runs instead of their run
    stage: str = "the job"  # the label of the stage running now (for failures)
    env: dict[str, Any] = field(default_factory=dict)
    adapter: Any = None  # ascendbench.devices.adapter.DeviceAdapter
    precision: Precision | None = None
    loader: Any = None  # ascendbench.models.base.ModelLoader or any loader with .load
    weights: dict[str, Any] | None = None
    found: Any = None  # what a dry run's weights lookup found
    model: Any = None  # a module, a pipeline, or the model on the meta device (dry runs)
    task: Any = None  # ascendbench.tasks.base.Task
    inputs: dict[str, torch.Tensor] | None = None
    inputs_info: dict[str, Any] = field(default_factory=dict)
    reference: Any = None  # ascendbench.baseline.store.Baseline
    replay: Any = None  # the replay reference's plan
    outputs: dict[str, torch.Tensor] | None = None
    placement: dict[str, Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    verdict: str | None = None
    artifacts: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)  # the dry run's findings
    problems: list[str] = field(default_factory=list)  # what would make the real job fail

    def record(self, section: Mapping[str, Any]) -> None:
        """Write a section to the record now (merged one level deep)."""
        merge_sections(self.writer.data, section)
        self.writer.write()

    def add_plan(self, section: Mapping[str, Any]) -> None:
        """Add a stage's findings to the dry run's plan (merged one level deep)."""
        merge_sections(self.plan, section)

    def warn(self, message: str) -> None:
        """A warning shown in the summary and the report (written to the record at once)."""
        self.writer.data["warnings"].append(message)
        self.writer.write()

    def attempt(self, what: str, fn: Callable[[], Any], default: Any = None) -> Any:
        """Run one part of a plan: our own error becomes a problem, any other ``unavailable``."""
        try:
            return fn()
        except AscendBenchError as exc:
            self.problems.append(str(exc))
        except Exception as exc:
            text = " ".join(str(exc).split())[:300]
            return {"unavailable": f"{what}: {type(exc).__name__}: {text}"}
        return default

    def relative(self, path: Path | str) -> str:
        """``path`` relative to the job directory, as the record keeps artifact paths."""
        return str(Path(path).relative_to(self.dir))


def merge_sections(into: dict[str, Any], section: Mapping[str, Any]) -> None:
    """Merge ``section`` into ``into``: mappings one level deep, other values replaced."""
    for key, value in section.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), Mapping):
            into[key] = {**into[key], **value}
        else:
            into[key] = value
