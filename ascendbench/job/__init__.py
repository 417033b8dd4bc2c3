"""The job: one composed config -> one ``record.json``, as a :class:`Job` passed through a list of stages.

    config -> device -> load -> inputs -> reference -> device run -> evaluate -> compare -> artifacts

Each stage (:mod:`ascendbench.job.stages`) has ``plan(job)`` and ``run(job)`` and returns its own record
section; ``dry_run=true`` is the same loop calling ``plan``. :func:`run_job` is the entry point.

The names below are loaded on first use (PEP 562): the stages import torch and the metric stack, which
``--help``, ``--version`` and ``--cfg`` never need, while ``ascendbench.job.launch`` (imported by the CLI
at start-up) lives in this package too.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"Job": "ascendbench.job.job", "run_job": "ascendbench.job.runner",
            "STAGES": "ascendbench.job.stages", "Stage": "ascendbench.job.stages"}

__all__ = ["STAGES", "Job", "Stage", "run_job"]


def __getattr__(name: str) -> Any:
    """Import the module that defines an exported name the first time it is asked for."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
