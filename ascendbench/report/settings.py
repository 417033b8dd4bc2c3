"""The report's options: ``conf/report.yaml`` plus ``key=value`` overrides from the command line."""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Iterable

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendbench.config import config_dir
from ascendbench.errors import ReportError
from ascendbench.report.backfill import SECTIONS
from ascendbench.report.fmt import LANGS
from ascendbench.report.performance import perf_show
from ascendbench.report.significance import METHODS

SETTINGS_FILE = "report.yaml"
log = logging.getLogger(__name__)


def load_settings(overrides: Iterable[str] = ()) -> DictConfig:
    """The report options with dotted overrides applied (ReportError: malformed or invalid)."""
    settings = OmegaConf.load(config_dir() / SETTINGS_FILE)
    OmegaConf.set_struct(settings, True)
    overrides = list(overrides)
    try:
        merged = OmegaConf.merge(settings, OmegaConf.from_dotlist(overrides))
    except (OmegaConfBaseException, ValueError) as exc:
        raise ReportError(
            f"report option override {overrides} is not valid: {exc}. Keys and defaults are in "
            f"{config_dir() / SETTINGS_FILE}; write them as `--set section.key=value`, "
            "e.g. `--set compare.min_effect=0.05`.") from None
    check_compare(merged)
    for key in ("embed_max_mb", "embed_total_mb"):
        merged.html[key] = _number(merged.html[key], lambda v: v > 0, (
            f"html.{key}={{raw!r}} is not allowed: report.html embeds pictures up to a size in "
            "MiB, a finite number > 0 (larger pictures stay links). Pass e.g. "
            f"`--set html.{key}=8`."))
    if str(merged.get("lang")) not in LANGS:
        raise ReportError(f"report option lang={merged.get('lang')!r} is not allowed: use one of "
                          f"{', '.join(LANGS)} (zh: the seeds' Chinese header words), e.g. "
                          "`--lang zh` or `--set lang=zh`.")
    chosen = merged.get("sections")
    unknown = [str(n) for n in chosen or [] if str(n) not in SECTIONS]
    if chosen is not None and (not OmegaConf.is_list(chosen) or unknown):
        names = ", ".join(unknown) or "no list"
        raise ReportError(f"report option sections={chosen!r} names {names}:"
                          f" give null (every section) or a list of {', '.join(SECTIONS)}, e.g. "
                          "`--set 'sections=[seed_layouts,failures]'`.")
    merged.performance.show = perf_show(merged.performance.show)
    return merged


def _number(raw: Any, allowed: Callable[[float], bool], message: str) -> float:
    """``raw`` as a finite float ``allowed`` accepts; else ReportError(``message`` with ``raw``)."""
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or not allowed(value):
        raise ReportError(message.format(raw=raw))
    return value


def check_compare(settings: DictConfig) -> None:
    """Validate the gate's ``compare`` options and store them typed (ReportError names the key)."""
    compare = settings.compare
    if compare.method is not None and compare.method not in METHODS:
        raise ReportError(
            f"compare.method={compare.method!r} is not allowed: it is deprecated and ignored (the "
            f"gate has one rule, docs/reports.md), and accepted as null or one of "
            f"{', '.join(METHODS)}. Drop it.")
    compare.alpha = _number(compare.alpha, lambda v: 0 < v < 1, (
        "compare.alpha={raw!r} is not allowed: the significance level of the gate's test is a "
        "number strictly between 0 and 1 (0.05: a 5% chance of calling an unchanged workload "
        "slower). Pass e.g. `--alpha 0.01` or `--set compare.alpha=0.01`."))
    shift = ("a finite fraction >= 0 (0.03: NEW must be more than 3% slower). Pass e.g. "
             "`--min-effect 0.05` or `--set compare.min_effect=0.05`.")
    if compare.noise is not None:
        compare.min_effect = _number(compare.noise, lambda v: v >= 0, (
            "compare.noise={raw!r} is not allowed: compare.noise (deprecated alias of "
            f"compare.min_effect) is {shift}"))
        log.warning("compare.noise / --noise is deprecated: it sets compare.min_effect=%g, the "
                    "smallest latency shift that counts (the gate also requires significance now); "
                    "use --min-effect", compare.min_effect)
    compare.min_effect = _number(compare.min_effect, lambda v: v >= 0, (
        f"compare.min_effect={{raw!r}} is not allowed: the smallest latency shift that counts is "
        f"{shift}"))
    raw = compare.min_samples
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 2):
        raise ReportError(
            f"compare.min_samples={raw!r} is not allowed: it is deprecated and ignored (the gate "
            "has one rule, docs/reports.md), and accepted as null or an integer >= 2. Drop it.")
    if not isinstance(compare.allow_missing, bool):
        raise ReportError(
            f"compare.allow_missing={compare.allow_missing!r} is not allowed: it is true or false. "
            "Pass `--set compare.allow_missing=true` to let OLD workloads be missing in NEW.")
