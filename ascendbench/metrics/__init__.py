"""Metrics: pure functions (:mod:`ascendbench.metrics.functional`), verdict rules, and evaluators by ``_target_``.

A metric option (``conf/metric/<option>.yaml``) builds a :class:`MetricSuite` of evaluators:
``regression`` (every floating-point output), ``image`` (+ PSNR/SSIM/LPIPS per image),
``video`` (+ the same per frame) and ``tokens`` (+ agreement and codebook range of integer outputs).
"""

from ascendbench.metrics.functional import cosine_similarity, psnr_db, regression_metrics
from ascendbench.metrics.image import ImageEvaluator
from ascendbench.metrics.regression import RegressionEvaluator
from ascendbench.metrics.suite import MetricSuite
from ascendbench.metrics.tokens import TokenEvaluator
from ascendbench.metrics.verdict import judge, merge_rules, worst
from ascendbench.metrics.video import VideoEvaluator

__all__ = ["ImageEvaluator", "MetricSuite", "RegressionEvaluator", "TokenEvaluator", "VideoEvaluator",
           "cosine_similarity", "judge", "merge_rules", "psnr_db", "regression_metrics", "worst"]
