"""``python -m ascendbench.acceptance device=cpu|cuda|npu`` (``make device-check``): one command
that proves the harness on whatever device is present (docs/devices.md, "The acceptance run")."""
