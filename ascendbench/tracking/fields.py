"""One record -> what an MLflow run holds: params, metrics, tags, artifacts (pure functions, no MLflow import).

* **params**: the record's resolved ``config``, flattened to dotted keys (``preset.height``), values as the
  command line writes them (``true``, ``null``, ``[8, 16]``). A value longer than the store accepts is cut and
  ends with :data:`TRUNCATED`; its key is listed in the ``ascendbench.truncated`` tag.
* **metrics**: every finite number of the report's row of the record (:func:`ascendbench.report.gather.record_row`)
  in the sections :data:`METRIC_SECTIONS`: metric values and thresholds, bench latency (median, CI, percentiles),
  throughput, memory, FLOPs, hidden-state aggregates, profile, stage timings. An infinite value (a PSNR of
  identical outputs, a ratio over zero) cannot be an MLflow metric: it is left out and named, with its value, in
  the ``ascendbench.nonfinite`` tag. NaN is already ``null`` in a record, i.e. missing.
* **tags**: :data:`TAG_COLUMNS` (verdict, status, device, dtype, model, preset, weights kind, version...).

A key MLflow cannot store (``layer/blocks.0#1/0/cosine``: ``#`` is not allowed) has each such character replaced
by ``_``; if two keys then collide, the first is kept and the other named in the notes.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ascendbench.report.gather import flatten

# Row sections whose numbers are measurements; job.*/env.* describe the workload and host (params and tags).
METRIC_SECTIONS = ("metrics.", "bench.", "hidden.", "profile.", "timing.", "weights.", "baseline.")
# Run tag -> the report row's column it is read from. A missing value sets no tag.
TAG_COLUMNS = {"verdict": "verdict", "status": "status", "device": "job.device", "dtype": "job.dtype",
               "model": "job.model", "preset": "job.preset", "weights": "weights.kind",
               "ascendbench.version": "env.ascendbench", "host": "env.hostname", "device_name": "env.device.name",
               "error": "error.type"}
TRUNCATED = "...[truncated]"
MAX_KEY = 250  # characters of a param, metric or tag name (MLflow 2 and 3)
_BAD_KEY_CHARS = re.compile(r"[^/\w.\- :]")


@dataclass(frozen=True)
class Limits:
    """What the tracking store accepts (MLflow 3.x defaults; the exporter reads the installed client's)."""

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
        return [*self.notes, f"{len(self.renamed)} key(s) renamed (characters MLflow refuses became '_'), e.g. "
                             f"{self.renamed[0]}"]


def safe_key(key: str, limit: int = MAX_KEY) -> str:
    """``key`` as MLflow accepts it: characters outside ``[/\\w.\\- :]`` become ``_``, no path tricks, bounded.

    >>> safe_key("metrics.layer/blocks.0#1/0/cosine.value")
    'metrics.layer/blocks.0_1/0/cosine.value'
    """
    name = _BAD_KEY_CHARS.sub("_", key)
    if posixpath.normpath(name) != name or name.startswith("/"):
        name = name.replace("/", "_")
    if len(name) > limit:
        digest = hashlib.sha256(key.encode()).hexdigest()[:8]
        name = f"{name[:limit - 9]}~{digest}"
    return name


def param_text(value: Any) -> str:
    """A config value as the command line writes it: strings as they are, anything else as JSON.

    >>> [param_text(v) for v in ("fp16", True, None, 2.5, [8, 16])]
    ['fp16', 'true', 'null', '2.5', '[8, 16]']
    """
    return value if isinstance(value, str) else json.dumps(value)


def cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters, ending with :data:`TRUNCATED` when it was cut."""
    return text if len(text) <= limit else text[:limit - len(TRUNCATED)] + TRUNCATED


def _put(target: dict[str, Any], key: str, value: Any, fields: RunFields) -> None:
    """``target[safe_key(key)] = value``, noting a renamed key and keeping the first of two that collide."""
    name = safe_key(key)
    if name in target:
        fields.notes.append(f"{key!r} left out: it collides with another key as {name!r}")
        return
    if name != key:
        fields.renamed.append(f"{key!r} -> {name!r}")
    target[name] = value


def run_params(config: Mapping[str, Any], limits: Limits, fields: RunFields) -> None:
    """The flattened resolved config as params into ``fields`` (long values cut, see the module docstring)."""
    cut_keys = []
    flat = {key.lstrip("."): value for key, value in flatten(config, "").items()}  # ".seed" -> "seed"
    for key, value in flat.items():
        text = param_text(value)
        if len(text) > limits.param_value:
            cut_keys.append(key)
        _put(fields.params, key, cut(text, limits.param_value), fields)
    if cut_keys:
        fields.tags["ascendbench.truncated"] = cut(",".join(cut_keys), limits.tag_value)
        fields.notes.append(f"{len(cut_keys)} param value(s) cut to {limits.param_value} characters")


def run_metrics(row: Mapping[str, Any], fields: RunFields) -> None:
    """The finite numbers of the row's measurement sections as metrics; infinite ones named in a tag."""
    skipped = []
    for key, value in row.items():
        if not key.startswith(METRIC_SECTIONS) or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            _put(fields.metrics, key, float(value), fields)
        elif not math.isnan(value):
            skipped.append(f"{key}={value}")
    if skipped:
        fields.tags["ascendbench.nonfinite"] = ",".join(skipped)
        fields.notes.append(f"{len(skipped)} non-finite value(s) not logged as metrics: {', '.join(skipped[:3])}")


def run_tags(row: Mapping[str, Any], fields: RunFields) -> None:
    """The :data:`TAG_COLUMNS` the row has a value for."""
    for tag, column in TAG_COLUMNS.items():
        value = row.get(column)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            fields.tags[tag] = str(value)


def run_fields(record: Mapping[str, Any], row: Mapping[str, Any], limits: Limits = Limits()) -> RunFields:
    """Params, metrics and tags of one record (``row``: its report row, :func:`record_row`)."""
    fields = RunFields()
    run_params(record.get("config") or {}, limits, fields)
    run_metrics(row, fields)
    run_tags(row, fields)
    fields.tags = {safe_key(k): cut(v, limits.tag_value) for k, v in fields.tags.items()}
    return fields


def chunks(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    """``items`` in lists of at most ``size`` (MLflow's batch limits)."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
