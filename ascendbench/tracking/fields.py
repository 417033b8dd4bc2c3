"""One record -> an MLflow run's params, metrics, tags (no MLflow import; docs/tracking.md)."""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ascendbench.report.gather import flatten

# Row sections whose numbers are measurements; job.*/env.* describe the workload (params, tags).
METRIC_SECTIONS = ("metrics.", "bench.", "hidden.", "profile.", "timing.", "weights.", "baseline.")
# Run tag -> the report row's column it is read from. A missing value sets no tag.
TAG_COLUMNS = {"verdict": "verdict", "status": "status", "device": "job.device",
               "dtype": "job.dtype", "model": "job.model", "preset": "job.preset",
               "weights": "weights.kind", "ascendbench.version": "env.ascendbench",
               "host": "env.hostname", "device_name": "env.device.name", "error": "error.type"}
TRUNCATED = "...[truncated]"
MAX_KEY = 250  # characters of a param, metric or tag name (MLflow 2 and 3)
_BAD_KEY_CHARS = re.compile(r"[^/\w.\- :]")


@dataclass(frozen=True)
class Limits:
    """What the tracking store accepts (MLflow 3 defaults; the exporter reads the client's)."""

    param_value: int = 6000
    tag_value: int = 8000


@dataclass
class RunFields:
    """Everything one run is given, plus the notes on what had to be changed or left out."""

    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        """The notes, with the renamed keys counted in one line."""
        if not self.renamed:
            return list(self.notes)
        return [*self.notes, f"{len(self.renamed)} key(s) renamed (characters MLflow refuses "
                             f"became '_'), e.g. {self.renamed[0]}"]

    def put(self, target: dict[str, Any], key: str, value: Any) -> None:
        """``target[safe_key(key)] = value``, noting a rename; of colliding keys the first stays."""
        name = safe_key(key)
        if name in target:
            self.notes.append(f"{key!r} left out: it collides with another key as {name!r}")
            return
        if name != key:
            self.renamed.append(f"{key!r} -> {name!r}")
        target[name] = value


def safe_key(key: str, limit: int = MAX_KEY) -> str:
    """``key`` as MLflow accepts it: characters outside ``[/\\w.\\- :]`` become ``_``, bounded.
    >>> safe_key("metrics.layer/blocks.0#1/0/cosine.value")
    'metrics.layer/blocks.0_1/0/cosine.value'"""
    name = _BAD_KEY_CHARS.sub("_", key)
    if posixpath.normpath(name) != name or name.startswith("/"):
        name = name.replace("/", "_")
    if len(name) > limit:
        name = f"{name[:limit - 9]}~{hashlib.sha256(key.encode()).hexdigest()[:8]}"
    return name


def param_text(value: Any) -> str:
    """A config value as the command line writes it: strings as they are, anything else as JSON.
    >>> [param_text(v) for v in ("fp16", True, None, 2.5, [8, 16])]
    ['fp16', 'true', 'null', '2.5', '[8, 16]']"""
    return value if isinstance(value, str) else json.dumps(value)


def cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters, ending with :data:`TRUNCATED` when it was cut."""
    return text if len(text) <= limit else text[:limit - len(TRUNCATED)] + TRUNCATED


def run_fields(record: Mapping[str, Any], row: Mapping[str, Any],
               limits: Limits = Limits()) -> RunFields:
    """Params, metrics and tags of one record (``row``: its report row)."""
    fields, cut_keys, nonfinite = RunFields(), [], []
    for key, value in flatten(record.get("config") or {}, "").items():
        text = param_text(value)
        if len(text) > limits.param_value:
            cut_keys.append(key.lstrip("."))
        fields.put(fields.params, key.lstrip("."), cut(text, limits.param_value))  # ".seed"
    if cut_keys:
        fields.tags["ascendbench.truncated"] = ",".join(cut_keys)
        fields.notes.append(f"{len(cut_keys)} param value(s) cut to {limits.param_value} "
                            "characters")
    for key, value in row.items():
        if not key.startswith(METRIC_SECTIONS) or isinstance(value, bool) or not isinstance(
                value, (int, float)):
            continue
        if math.isfinite(value):
            fields.put(fields.metrics, key, float(value))
        elif not math.isnan(value):
            nonfinite.append(f"{key}={value}")
    if nonfinite:
        fields.tags["ascendbench.nonfinite"] = ",".join(nonfinite)
        fields.notes.append(f"{len(nonfinite)} non-finite value(s) not logged as metrics: "
                            f"{', '.join(nonfinite[:3])}")
    for tag, column in TAG_COLUMNS.items():
        value = row.get(column)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            fields.tags[tag] = str(value)
    fields.tags = {safe_key(k): cut(v, limits.tag_value) for k, v in fields.tags.items()}
    return fields


def chunks(items: Iterable[Any], size: int) -> list[list[Any]]:
    """``items`` in lists of at most ``size`` (MLflow's batch limits)."""
    items = list(items)
    return [items[start:start + size] for start in range(0, len(items), size)]
