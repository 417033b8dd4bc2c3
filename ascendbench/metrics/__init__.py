"""Metrics: pure functions (:mod:`ascendbench.metrics.functional`), verdict rules, and evaluators by ``_target_``.

A metric option (``conf/metric/<option>.yaml``) builds a :class:`MetricSuite` of evaluators:
``regression`` (every floating-point output), ``image`` (+ PSNR/SSIM/LPIPS per image),
``video`` (+ the same per frame) and ``tokens`` (+ agreement and codebook range of integer outputs).

The names below are loaded on first use (PEP 562), so that ``ascendbench.metrics.verdict`` (the verdict
order, read by the CLI at start-up) does not pull in scikit-image, scipy and lpips.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "cosine_similarity": "ascendbench.metrics.functional", "psnr_db": "ascendbench.metrics.functional",
    "regression_metrics": "ascendbench.metrics.functional", "ImageEvaluator": "ascendbench.metrics.image",
    "RegressionEvaluator": "ascendbench.metrics.regression", "FunctionEvaluator": "ascendbench.metrics.function",
    "MetricSuite": "ascendbench.metrics.suite",
    "TokenEvaluator": "ascendbench.metrics.tokens", "judge": "ascendbench.metrics.verdict",
    "merge_rules": "ascendbench.metrics.verdict", "worst": "ascendbench.metrics.verdict",
    "VideoEvaluator": "ascendbench.metrics.video", "lpips_net": "ascendbench.metrics.lpips_net",
}

__all__ = ["FunctionEvaluator", "ImageEvaluator", "MetricSuite", "RegressionEvaluator", "TokenEvaluator",
           "VideoEvaluator", "cosine_similarity", "judge", "merge_rules", "psnr_db", "regression_metrics", "worst"]


def __getattr__(name: str) -> Any:
    """Import the module that defines an exported name the first time it is asked for."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name])
    return module if module.__name__.endswith("." + name) else getattr(module, name)
