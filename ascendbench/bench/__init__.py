"""Timing: the bench loop and its latency statistics."""

from ascendbench.bench.loop import BenchResult, run_bench
from ascendbench.bench.stats import LatencyStats

__all__ = ["BenchResult", "LatencyStats", "run_bench"]
