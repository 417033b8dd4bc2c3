"""Latency statistics of a list of timed samples."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class LatencyStats:
    """Summary of per-call latencies, all in milliseconds."""

    count: int
    mean_ms: float
    median_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    p90_ms: float
    p95_ms: float

    @classmethod
    def from_seconds(cls, samples: Sequence[float]) -> "LatencyStats":
        """Build from samples in seconds (at least one).

        >>> LatencyStats.from_seconds([0.001, 0.002, 0.003]).median_ms
        2.0
        """
        if not samples:
            raise ValueError("LatencyStats needs at least one sample")
        ms = np.asarray(samples, dtype=np.float64) * 1e3
        return cls(
            count=int(ms.size),
            mean_ms=float(ms.mean()),
            median_ms=float(np.median(ms)),
            min_ms=float(ms.min()),
            max_ms=float(ms.max()),
            std_ms=float(ms.std(ddof=1)) if ms.size > 1 else 0.0,
            p90_ms=float(np.percentile(ms, 90)),
            p95_ms=float(np.percentile(ms, 95)),
        )

    def to_dict(self) -> dict[str, float]:
        """Plain dict for the record."""
        return asdict(self)
