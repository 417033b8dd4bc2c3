"""Layer-level comparison (forward hooks, first divergent module), compare.csv and output pictures.

``compare.layers`` (``conf/compare/default.yaml``) chooses what is hooked: module name patterns
(each captured output gets the regression metrics and the ``compare.thresholds`` verdicts) or ``all``
(statistics of every module, and the first module whose inputs agree but whose output diverges).
"""

from ascendbench.compare.divergence import compare_modules, stats_rel_err
from ascendbench.compare.hooks import StatsCapture, TensorCapture, capturing, tensor_stats
from ascendbench.compare.layers import compare_layers
from ascendbench.compare.select import normalize_spec, select_modules

__all__ = ["StatsCapture", "TensorCapture", "capturing", "compare_layers", "compare_modules",
           "normalize_spec", "select_modules", "stats_rel_err", "tensor_stats"]
