"""One precision per job: the device dtype, its tolerances and rules, the reference dtype."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.config import load_option, plain
from ascendbench.errors import ConfigError
from ascendbench.metrics.verdict import merge_rules

log = logging.getLogger(__name__)

TORCH_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float16": torch.float16,
                                        "bfloat16": torch.bfloat16}
REFERENCE_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}
REFERENCE_CHOICES = ("auto", "same", *REFERENCE_DTYPES)
TOLERANCE_KEYS = ("small_value", "small_value_atol", "small_value_bound")


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).replace("torch.", "")


def torch_dtype(name: str, key: str = "dtype.name") -> torch.dtype:
    """The torch dtype of a device dtype name; a clear :class:`ConfigError` for anything else."""
    if name not in TORCH_DTYPES:
        raise ConfigError(f"{key}={name!r} is not supported; allowed: {', '.join(TORCH_DTYPES)} or "
                          "auto. Choose the option on the command line, e.g. `dtype=float16`.")
    return TORCH_DTYPES[name]


def reference_dtype(choice: str, device_dtype: torch.dtype) -> torch.dtype:
    """The reference precision under ``baseline.reference`` (``auto``: float64 if it fits).
    >>> reference_dtype("auto", torch.bfloat16), reference_dtype("same", torch.bfloat16)
    (torch.float64, torch.bfloat16)"""
    if choice not in REFERENCE_CHOICES:
        raise ConfigError(
            f"baseline.reference={choice!r} is not allowed; use one of "
            f"{', '.join(REFERENCE_CHOICES)} (auto: float64 whenever it fits in host memory, else "
            "float32; same: the device's dtype).")
    if choice == "auto":
        return torch.float64
    return device_dtype if choice == "same" else REFERENCE_DTYPES[choice]


def resolve_dtype_option(dtype_cfg: DictConfig, device_type: str) -> DictConfig:
    """The dtype option in force: ``auto`` becomes the device's choice, loaded from its own file."""
    if dtype_cfg.name != "auto":
        torch_dtype(dtype_cfg.name)
        return dtype_cfg
    chosen = OmegaConf.select(dtype_cfg, f"by_device.{device_type}")
    log.info("dtype=auto chose %s for device %s", chosen, device_type)
    return load_option("dtype", chosen)


@dataclass(frozen=True)
class Precision:
    """The numeric contract of a job: dtype, allclose tolerances, verdict rules, reference."""

    name: str
    requested: str
    atol: float
    rtol: float
    tolerances: Mapping[str, float] = field(default_factory=dict)
    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    reference: torch.dtype | None = None

    @classmethod
    def build(cls, cfg: DictConfig, device_type: str) -> Precision:
        """The job's precision from ``cfg.dtype``, ``model.thresholds``, ``baseline.reference``."""
        option = resolve_dtype_option(cfg.dtype, device_type)
        device = torch_dtype(option.name)
        enabled = cfg.baseline.enabled
        rules = merge_rules(plain(option.get("thresholds")),
                            plain(OmegaConf.select(cfg, "model.thresholds")))
        tolerances = {k: float(option[k]) for k in TOLERANCE_KEYS if option.get(k) is not None}
        reference = reference_dtype(str(cfg.baseline.reference), device) if enabled else None
        return cls(name=str(option.name), requested=str(cfg.dtype.name), atol=float(option.atol),
                   rtol=float(option.rtol), tolerances=tolerances, rules=rules, reference=reference)

    @property
    def dtype(self) -> torch.dtype:
        """The device run's torch dtype."""
        return TORCH_DTYPES[self.name]

    def allclose(self) -> dict[str, float]:
        """``atol``, ``rtol`` and the small-value tolerances, as the metrics' keyword arguments."""
        return {"atol": self.atol, "rtol": self.rtol, **self.tolerances}
