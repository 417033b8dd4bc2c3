"""Metrics: pure functions (:mod:`functional`), verdict rules, and evaluators by ``_target_``."""

from ascendbench.metrics.functional import cosine_similarity, psnr_db, regression_metrics
from ascendbench.metrics.regression import RegressionEvaluator
from ascendbench.metrics.verdict import judge, merge_rules, worst

__all__ = ["RegressionEvaluator", "regression_metrics", "cosine_similarity", "psnr_db", "judge",
           "merge_rules", "worst"]
