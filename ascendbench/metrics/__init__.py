"""Metrics: pure functions (``functional``), evaluators built by ``_target_``, verdict rules."""
