"""What a stage is: one step of a job, planned (``dry_run=true``) or run."""

from __future__ import annotations

from typing import Any

from ascendbench.job.job import Job


class Stage:
    """``run`` does the step, ``plan`` says what it would do without anything heavy (findings to
    ``job.plan``, problems to ``job.problems``); each returns its record section."""

    name = "stage"
    label = "the job"

    def plan(self, job: Job) -> dict[str, Any]:
        """What the stage would do; returns a record section."""
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Do the stage; returns its record section."""
        return {}
