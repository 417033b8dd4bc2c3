"""The report's options: ``conf/report.yaml`` plus ``key=value`` overrides from the command line."""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Iterable

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendbench.config import config_dir
from ascendbench.errors import ReportError
from ascendbench.report.columns import perf_show
from ascendbench.report.significance import METHODS
from ascendbench.report.words import LANGS

SETTINGS_FILE = "report.yaml"
log = logging.getLogger(__name__)


def load_settings(overrides: Iterable[str] = ()) -> DictConfig:
    """The report options with dotted overrides applied (e.g. ``compare.min_effect=0.05``).

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
            "e.g. `--set compare.min_effect=0.05`."
        ) from None
    check_compare(merged)
    check_html(merged)
    check_lang(merged)
    check_sections(merged)
    merged.performance.show = perf_show(merged.performance.show)
    return merged


def check_sections(settings: DictConfig) -> None:
    """``sections`` is null or a list of known section names."""
    from ascendbench.report.backfill import SECTIONS

    chosen = settings.get("sections")
    unknown = [str(n) for n in chosen or [] if str(n) not in SECTIONS]
    if chosen is not None and (not OmegaConf.is_list(chosen) or unknown):
        raise ReportError(f"report option sections={chosen!r} names {', '.join(unknown) or 'no list'}: give null "
                          f"(every section) or a list of {', '.join(SECTIONS)}, e.g. "
                          "`--set 'sections=[seed_layouts,failures]'`.")


def check_lang(settings: DictConfig) -> None:
    """``lang`` is ``en`` or ``zh`` (the seeds' own header words)."""
    if str(settings.get("lang")) not in LANGS:
        raise ReportError(f"report option lang={settings.get('lang')!r} is not allowed: use one of {', '.join(LANGS)} "
                          "(zh: the seeds' Chinese header words), e.g. `--lang zh` or `--set lang=zh`.")


def check_html(settings: DictConfig) -> None:
    """Validate ``html.embed_max_mb`` and ``html.embed_total_mb`` (numbers > 0) and store them as floats.

    Raises:
        ReportError: naming the key, the value, what is allowed and how to set it.
    """
    for key in ("embed_max_mb", "embed_total_mb"):
        settings.html[key] = _number(settings.html[key], lambda v: v > 0, (
            f"html.{key}={{raw!r}} is not allowed: report.html embeds pictures up to a size in MiB, a finite "
            f"number > 0 (larger pictures stay links). Pass e.g. `--set html.{key}=8`."))


def check_compare(settings: DictConfig) -> None:
    """Validate the ``compare`` options of the regression gate and store them with their proper types.

    ``alpha`` in (0, 1), ``min_effect`` a finite fraction >= 0 (``noise``, its deprecated alias, replaces it
    when set), ``allow_missing`` a boolean; the deprecated ``method`` (null or one of
    :data:`~ascendbench.report.significance.METHODS`) and ``min_samples`` (null or an integer >= 2).

    Raises:
        ReportError: naming the key, the value, what is allowed and how to set it.
    """
    compare = settings.compare
    if compare.method is not None and compare.method not in METHODS:
        raise ReportError(
            f"compare.method={compare.method!r} is not allowed: it is deprecated and ignored (the gate has one "
            f"rule, docs/reports.md), and accepted as null or one of {', '.join(METHODS)}. Drop it.")
    compare.alpha = _number(compare.alpha, lambda v: 0 < v < 1, (
        "compare.alpha={raw!r} is not allowed: the significance level of the gate's test is a number strictly "
        "between 0 and 1 (0.05: a 5% chance of calling an unchanged workload slower). Pass e.g. `--alpha 0.01` "
        "or `--set compare.alpha=0.01`."))
    _alias_noise(compare)
    compare.min_effect = _number(compare.min_effect, lambda v: v >= 0, (
        "compare.min_effect={raw!r} is not allowed: the smallest latency shift that counts is a finite fraction "
        ">= 0 (0.03: NEW must be more than 3% slower). Pass e.g. `--min-effect 0.05` or "
        "`--set compare.min_effect=0.05`."))
    _check_min_samples(compare)
    if not isinstance(compare.allow_missing, bool):
        raise ReportError(
            f"compare.allow_missing={compare.allow_missing!r} is not allowed: it is true or false. "
            "Pass `--set compare.allow_missing=true` to let OLD workloads be missing in NEW."
        )


def _number(raw: Any, allowed: Callable[[float], bool], message: str) -> float:
    """``raw`` as a finite float that ``allowed`` accepts; else ReportError with ``message`` (``{raw!r}`` filled)."""
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or not allowed(value):
        raise ReportError(message.format(raw=raw))
    return value


def _alias_noise(compare: DictConfig) -> None:
    """``compare.noise`` (``--noise``), when set, is validated and replaces ``compare.min_effect``, with a warning."""
    if compare.noise is None:
        return
    compare.min_effect = _number(compare.noise, lambda v: v >= 0, (
        "compare.noise={raw!r} is not allowed: compare.noise (deprecated alias of compare.min_effect) is a finite "
        "fraction >= 0 (0.03: NEW must be more than 3% slower). Pass e.g. `--min-effect 0.05` or "
        "`--set compare.min_effect=0.05`."))
    log.warning("compare.noise / --noise is deprecated: it sets compare.min_effect=%g, the smallest latency shift "
                "that counts (the gate also requires significance now); use --min-effect", compare.min_effect)


def _check_min_samples(compare: DictConfig) -> None:
    raw = compare.min_samples
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 2):
        raise ReportError(
            f"compare.min_samples={raw!r} is not allowed: it is deprecated and ignored (the gate has one rule, "
            "docs/reports.md), and accepted as null or an integer >= 2. Drop it.")
