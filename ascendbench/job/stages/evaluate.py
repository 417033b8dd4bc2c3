"""Evaluation: the metric suite against the reference, the task's own gates and the output
validation, with verdicts (rules: dtype < model < metric < evaluator)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import torch
from omegaconf import DictConfig

from ascendbench.baseline.source import SourceBaseline, benchmark, check_outputs
from ascendbench.config.targets import build
from ascendbench.job.job import Job
from ascendbench.job.placement import placement_entry
from ascendbench.job.stages.base import Stage
from ascendbench.metrics.clip import clip_entries
from ascendbench.metrics.output_checks import identical_reference, output_checks
from ascendbench.metrics.verdict import worst
from ascendbench.patches.registry import patches_applied
from ascendbench.precision import Precision
from ascendbench.tasks.checks import CheckContext

SANITY = "reference_nonfinite"  # the suite's check of the reference itself, not of the device


def evaluate(metric_cfg: DictConfig, precision: Precision, reference: Mapping[str, torch.Tensor],
             outputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Entries of the metric option's evaluators under the job's rules."""
    suite = build(metric_cfg, "metric")
    return suite.evaluate(reference, outputs, dict(precision.rules), **precision.allclose())


class EvaluateStage(Stage):
    """``metric`` evaluators, ``task.checks`` and the output validation (NaN/Inf and the task's
    value range; with or without a reference)."""

    name, label = "evaluate", "the metrics"

    def plan(self, job: Job) -> dict[str, Any]:
        """The metric suite is built, so that a wrong metric config is a problem of the plan."""
        build(job.cfg.metric, "metric")
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Metrics, gates and the output validation into ``job.metrics``, with the job verdict."""
        rules = dict(job.precision.rules)
        checks = self._checks(job)
        validation = output_checks(job.outputs, job.task, job.weights, rules, job.reference)
        validation.update(clip_entries(job.cfg.metric.get("clip"), job))
        saved = isinstance(job.reference, SourceBaseline)
        if saved:  # a saved reference (baseline.source): names and shapes first
            check_outputs(job.reference, job.outputs)
        judged = False
        if job.reference is not None:
            job.metrics = evaluate(job.cfg.metric, job.precision, job.reference, job.outputs)
            judged = any(isinstance(m, Mapping) and m.get("verdict") and not name.endswith(SANITY)
                         for name, m in job.metrics.items())
            job.metrics.update(identical_reference(job.reference, job.outputs, job.precision.dtype))
        if job.placement is not None:
            validation["placement_findings"] = placement_entry(job.placement, rules)
        job.metrics = {**job.metrics, **checks, **validation}
        # the worst verdict; without a reference or a task gate only a WARN or FAIL: finite,
        # in-range outputs alone are no evidence of correctness
        verdict = worst(m.get("verdict") for m in job.metrics.values())
        job.verdict = verdict if judged or checks or verdict != "PASS" else None
        section = {"metrics": job.metrics, "verdict": job.verdict}
        if saved:
            section["baseline"] = {"benchmark": benchmark(job.reference, job.outputs,
                                                          _regression_score(job))}
        return section

    def _checks(self, job: Job) -> dict[str, Any]:
        """The task's own gates, run with the model's device patches (``{}`` for most tasks)."""
        cfg, adapter, precision = job.cfg, job.adapter, job.precision

        @contextmanager
        def control() -> Iterator[torch.nn.Module]:  # the architecture, random-init, patched
            twin = job.loader.load(cfg.model.source, "random", cfg.model.init_seed,
                                   cfg.model.get("revision")).module
            with patches_applied(cfg.model.get("patches"), twin, adapter.name, precision.name):
                yield twin

        ctx = CheckContext(module=job.model, device=adapter.torch_device, dtype=precision.dtype,
                           inputs=job.inputs, outputs=job.outputs, weights=job.weights,
                           rules=dict(precision.rules), control=control)
        with patches_applied(cfg.model.get("patches"), job.model, adapter.name, precision.name):
            return job.task.checks(ctx)


def _regression_score(job: Job) -> Any:
    """Metric name -> value of the job's regression evaluator (what cross-device limits name)."""
    evaluator = build(job.cfg.metric, "metric").evaluators.get("regression")

    def score(reference: Mapping[str, torch.Tensor],
              outputs: Mapping[str, torch.Tensor]) -> dict[str, float]:
        if evaluator is None:  # metric.evaluators.regression=null: nothing to divide
            return {}
        entries = evaluator.evaluate(reference, outputs, dict(job.precision.rules),
                                     **job.precision.allclose())
        return {name: entry["value"] for name, entry in entries.items() if "value" in entry}

    return score
