"""Timing: the bench loop, its budget and stop rule, latency statistics, FLOPs, peak, phases."""
