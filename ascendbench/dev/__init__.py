"""Developer tools of ascendbench itself (not used by a job): ``python -m ascendbench.dev.layers``."""
