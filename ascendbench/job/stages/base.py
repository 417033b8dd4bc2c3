"""What a stage is; a stage builds a config node into an object with :func:`ascendbench.config.targets.build`."""

from __future__ import annotations

from typing import Any

from ascendbench.config.targets import build  # noqa: F401  (the stages build their nodes with it)
from ascendbench.job.job import Job


class Stage:
    """One step of a job. ``run`` does it, ``plan`` says what it would do without loading or computing
    anything heavy (``dry_run=true``); each returns its own record section (top-level record fields,
    merged one level deep) and keeps what later stages need on the :class:`~ascendbench.job.job.Job`.
    A plan adds its findings to ``job.plan`` (:meth:`~ascendbench.job.job.Job.add_plan`), written as the
    record's ``plan`` once every stage has planned.

    Attributes:
        name: short name of the stage.
        label: how messages name it (``the device run``: "out of memory ... during the device run").
    """

    name = "stage"
    label = "the job"

    def plan(self, job: Job) -> dict[str, Any]:
        """What the stage would do (into ``job.plan``); problems go to ``job.problems``; returns a record section."""
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Do the stage; returns its record section."""
        return {}
