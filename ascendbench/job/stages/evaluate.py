"""Evaluation: the metric suite against the reference, plus the task's own gates, with verdicts."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import torch
from omegaconf import DictConfig

from ascendbench.job.job import Job
from ascendbench.job.stages.base import Stage, build
from ascendbench.metrics import worst
from ascendbench.patches import patches_applied
from ascendbench.precision import Precision
from ascendbench.tasks.checks import CheckContext


def evaluate(metric_cfg: DictConfig, precision: Precision, reference: Mapping[str, torch.Tensor],
             outputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Entries of the metric option's evaluators; rules: dtype < model (``precision.rules``) < metric < evaluator."""
    suite = build(metric_cfg, "metric")
    return suite.evaluate(reference, outputs, dict(precision.rules), **precision.allclose())


class EvaluateStage(Stage):
    """``metric`` evaluators (rules: dtype < model < metric < evaluator) and ``task.checks``."""

    name, label = "evaluate", "the metrics"

    def plan(self, job: Job) -> dict[str, Any]:
        """The metric suite is built, so that a wrong metric config is a problem of the plan."""
        build(job.cfg.metric, "metric")
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Metrics and gates into ``job.metrics``; the section carries them with the job verdict."""
        checks = self._checks(job)
        if job.reference is None and not checks:
            return {}
        if job.reference is not None:
            job.metrics = evaluate(job.cfg.metric, job.precision, job.reference, job.outputs)
        job.metrics = {**job.metrics, **checks}
        job.verdict = worst(m.get("verdict") for m in job.metrics.values())
        return {"metrics": job.metrics, "verdict": job.verdict}

    def _checks(self, job: Job) -> dict[str, Any]:
        """The task's own gates, run with the model's device patches (``{}`` for most tasks)."""

        @contextmanager
        def control() -> Iterator[torch.nn.Module]:  # the same architecture, randomly initialised and patched
            cfg = job.cfg
            twin = job.loader.load(cfg.model.source, "random", cfg.model.init_seed, cfg.model.get("revision")).module
            with patches_applied(cfg.model.get("patches"), twin, job.adapter.name):
                yield twin

        ctx = CheckContext(job.model, job.adapter.torch_device, job.precision.dtype, job.inputs, job.outputs,
                           job.weights, dict(job.precision.rules), control)
        with patches_applied(job.cfg.model.get("patches"), job.model, job.adapter.name):
            return job.task.checks(ctx)
