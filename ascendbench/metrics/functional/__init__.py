"""The math of every metric, as pure functions of tensors (no config, no state)."""
