"""Hydra callbacks of a sweep, one per module: the summary, the progress lines, the card pool."""
