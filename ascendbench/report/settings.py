"""The report's options: ``conf/report.yaml`` plus ``key=value`` overrides from the command line."""

from __future__ import annotations

import math
from typing import Iterable

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendbench.config import config_dir
from ascendbench.errors import ReportError

SETTINGS_FILE = "report.yaml"


def load_settings(overrides: Iterable[str] = ()) -> DictConfig:
    """The report options with dotted overrides applied (e.g. ``compare.noise=0.05``).

    Raises:
        ReportError: an override is malformed or names a key the options do not have.
    """
    settings = OmegaConf.load(config_dir() / SETTINGS_FILE)
    OmegaConf.set_struct(settings, True)
    overrides = list(overrides)
    try:
        merged = OmegaConf.merge(settings, OmegaConf.from_dotlist(overrides))
    except (OmegaConfBaseException, ValueError) as exc:
        raise ReportError(
            f"report option override {overrides} is not valid: {exc}. Keys and defaults are in "
            f"{config_dir() / SETTINGS_FILE}; write them as `--set section.key=value`, "
            "e.g. `--set compare.noise=0.05`."
        ) from None
    check_compare(merged)
    return merged


def check_compare(settings: DictConfig) -> None:
    """``compare.noise`` is a finite fraction >= 0 and ``compare.allow_missing`` a boolean.

    Raises:
        ReportError: naming the key, the value, what is allowed and how to set it.
    """
    raw = settings.compare.noise
    try:
        noise = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        noise = math.nan
    if not math.isfinite(noise) or noise < 0:
        raise ReportError(
            f"compare.noise={raw!r} is not allowed: the latency noise rule is a finite fraction >= 0 (0.03 "
            "means changes within 3% are noise). Pass e.g. `--noise 0.05` or `--set compare.noise=0.05`."
        )
    settings.compare.noise = noise
    if not isinstance(settings.compare.allow_missing, bool):
        raise ReportError(
            f"compare.allow_missing={settings.compare.allow_missing!r} is not allowed: it is true or false. "
            "Pass `--set compare.allow_missing=true` to let OLD workloads be missing in NEW."
        )
