"""Which limits judge the hidden states of one job: the seed's, or the device dtype's.

``compare.thresholds`` hold the Sulphur-2 seed's limits (max diff <= 1e-3, cosine >= 0.9999). The seed set
them for its protocol: a bf16 NPU run against a bf16 CPU run, both rounding alike. Against a reference of
higher precision (``baseline.reference=auto``: float64) every hidden state of a half-precision run carries
its own rounding error, far above 1e-3, so those limits would fail every bf16 job whatever the port does.
There ``compare.thresholds_by_dtype.<device dtype>`` is merged over them (a ``null`` rule removes one);
with ``baseline.reference=same`` (the seed's protocol: the reference in the device's dtype) or a float32
device run the seed's limits apply as they are.
"""

from __future__ import annotations

from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from ascendbench.metrics.verdict import merge_rules


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def hidden_rules(compare: Any, precision: Any) -> dict[str, dict[str, Any]]:
    """The rules for captured layer outputs of a job with this :class:`ascendbench.precision.Precision`.

    Args:
        compare: the ``compare`` config section (``thresholds``, optional ``thresholds_by_dtype``).
        precision: the job's precision (device dtype ``name``/``dtype``, ``reference`` dtype).
    """
    seed = _plain(compare.get("thresholds")) or {}
    by_dtype: Mapping[str, Any] = _plain(compare.get("thresholds_by_dtype")) or {}
    reference = getattr(precision, "reference", None)
    finer = reference is not None and reference.itemsize > precision.dtype.itemsize
    if finer and by_dtype.get(precision.name):
        return merge_rules(seed, by_dtype[precision.name])
    return merge_rules(seed)
