"""The CPU reference ("baseline") of a job: computed once in a clean process, cached by content hash.

``get_or_compute`` returns the reference outputs for a job, from ``baseline.cache_dir`` when a job with
the same model, weights, inputs, precision and library versions computed them before, otherwise from a
fresh ``python -m ascendbench.baseline`` process in which ``torch_npu`` cannot be imported (and which dies
with its job). Cached entries are verified against the digests in their ``meta.json`` and recomputed when they
do not verify; a cached reference of higher precision serves a request for a lower one.

This ``__init__`` imports nothing at import time (names resolve lazily) so that the reference process can
block torch_npu before torch or diffusers is first imported.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Baseline": "ascendbench.baseline.service",
    "get_or_compute": "ascendbench.baseline.service",
    "ReferenceQuery": "ascendbench.baseline.service",
    "reference_dtype": "ascendbench.precision",
    "key_material": "ascendbench.baseline.key",
    "cache_key": "ascendbench.baseline.key",
    "BaselineStore": "ascendbench.baseline.store",
    "run_reference": "ascendbench.baseline.compute",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ascendbench.baseline' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
