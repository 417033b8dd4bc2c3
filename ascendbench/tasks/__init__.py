"""Tasks: deterministic inputs from a preset and seed, and ``run(model, inputs) -> outputs``."""
