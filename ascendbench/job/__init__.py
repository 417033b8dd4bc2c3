"""The job: one composed config -> one ``record.json``, as a :class:`Job` passed through a list of stages.

    config -> device -> load -> inputs -> reference -> device run -> evaluate -> compare -> artifacts

Each stage (:mod:`ascendbench.job.stages`) has ``plan(job)`` and ``run(job)`` and returns its own record
section; ``dry_run=true`` is the same loop calling ``plan``. :func:`run_job` is the entry point.
"""

from ascendbench.job.job import Job
from ascendbench.job.runner import run_job
from ascendbench.job.stages import STAGES, Stage

__all__ = ["STAGES", "Job", "Stage", "run_job"]
