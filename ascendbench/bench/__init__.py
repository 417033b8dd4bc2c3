"""Timing: the bench loop, its budget and stop rule, latency statistics, FLOPs, peak, phases."""

from ascendbench.bench.budget import BenchBudget, StopRule
from ascendbench.bench.flops import FlopCount, count_flops, flops_section
from ascendbench.bench.loop import BenchLoop, BenchResult, run_bench
from ascendbench.bench.memory import MemoryDelta, tensor_bytes_mb
from ascendbench.bench.peak import peak_tflops
from ascendbench.bench.phases import PhaseTimer, summarize_phases
from ascendbench.bench.stats import Interval, LatencyStats

__all__ = ["BenchBudget", "BenchLoop", "BenchResult", "FlopCount", "Interval", "LatencyStats",
           "MemoryDelta",
           "PhaseTimer", "StopRule", "count_flops", "flops_section", "peak_tflops", "run_bench",
           "summarize_phases", "tensor_bytes_mb"]
