"""``python -m ascendbench.acceptance device=...`` (``make device-check``): proves the harness."""
