"""Cell formatting, Markdown tables and the seed layouts' words (absent values: ``missing``)."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd
import yaml

from ascendbench.digits import judged_rule, judged_value

MISSING = "missing"
DRY_RUN = "dry-run"  # a record's ``run`` when it only planned
# Ranked values of the row order (gather.SORT_KEYS); other values follow, alphabetically.
ORDER = {"job.preset": ("mini", "balanced", "quality"),
         "job.dtype": ("float32", "float16", "bfloat16")}
Row = Mapping[str, Any]
Rows = Sequence[Row]
LANGS = ("en", "zh")
IDENTITY = {"machine": "env.hostname", "device": "job.device", "dtype": "job.dtype",
            "workload": "workload", "steps": "job.steps", "batch": "job.batch_size"}
# key -> (English, Chinese): the Chinese words are the seeds' own headers (words.yaml)
WORDS: dict[str, tuple[str, str]] = {key: tuple(pair) for key, pair in yaml.safe_load(
    Path(__file__).with_name("words.yaml").read_text(encoding="utf-8")).items()}
SEED_DIGITS = {"cosine": 6}  # the seeds print a cosine with 6 decimals (0.999998, not 1)
CROSSED = {"<=": ">", ">=": "<"}  # a failing value's side of its rule's bound
_MD_ACTIVE = re.compile(r"[\\`*\[\]]|<(?=[A-Za-z/!?])")  # links, images, code, bold, tags


def present(value: Any) -> bool:
    """True when a cell holds a value (not ``None``/``NaN``/absent)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def get(row: Row, key: str) -> Any:
    """``row[key]`` or ``None`` when the column is absent or the cell is empty."""
    value = row.get(key)
    return value if present(value) else None


def latency(row: Row, stat: str = "median_ms") -> float | None:
    """A latency statistic (``median_ms``, ``p90_ms`` ...): the one place reports read it."""
    value = get(row, f"bench.latency.{stat}")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def num(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits; ``missing`` when absent."""
    if not present(value):
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    if not isinstance(value, float):
        return str(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.0f}" if 1e4 <= abs(value) < 1e15 else f"{value:.{digits}g}"


def md_escape(value: Any) -> str:
    """Record text made inert in Markdown (``\\ ` * [ ]`` and a ``<`` opening a tag escaped)."""
    return _MD_ACTIVE.sub(lambda m: "\\" + m.group(0), str(value))


def log_text(value: Any, limit: int = 400) -> str:
    """Record text no template wrote (an error, a skip reason) as :func:`short` log text (code)."""
    line = short(value, limit)
    raw = re.sub(r"\\([\\`*\[\]<])", r"\1", line)  # md_escape undone: code shows it as it is
    return line if "`" in raw else f"`{raw}`"


def text(value: Any) -> str:
    """Any cell as text (Markdown-escaped); ``missing`` when absent."""
    if isinstance(value, (int, float)):
        return num(value)
    return md_escape(value) if present(value) else MISSING


def short(message: Any, limit: int = 400) -> str:
    """First ``limit`` characters of a message on one line (the record keeps the whole text)."""
    if not present(message):
        return MISSING
    line = " ".join(str(message).split())
    return md_escape(line if len(line) <= limit else line[: limit - 1] + "…")


def judged(row: Row, prefix: str, metric: str) -> tuple[str, str | None, str]:
    """``(value, verdict, rule)`` under ``prefix``, the value with the digits its rule needs."""
    entry = {key: get(row, f"{prefix}.{key}") for key in ("value", "verdict", "rule", "threshold")}
    if entry["value"] is None:
        return MISSING, entry["verdict"], MISSING
    ruled = entry["rule"] is not None or entry["threshold"] is not None
    rule = judged_rule(metric, entry) if ruled else MISSING
    verdict = None if entry["verdict"] is None else md_escape(entry["verdict"])
    digits = SEED_DIGITS.get(metric.rsplit("/", 1)[-1], 4)
    return md_escape(judged_value(metric, entry, digits)), verdict, md_escape(rule)


def failed_rules(row: Row) -> list[str]:
    """``video/mean_rel_err 7.24% > 1%``: each failing metric and hidden check, with its bound."""
    said = []
    for key in [k[:-8] for k, v in row.items() if v == "FAIL" and k.endswith(".verdict")
                and k.startswith(("metrics.", "hidden.")) and not k.startswith("metrics.layer/")]:
        value, _, rule = judged(row, key, key.split(".", 1)[1])
        op, _, bound = rule.partition(" ")
        crossed = f"{CROSSED[op]} {bound}" if op in CROSSED else f"(rule {rule})"
        said.append(f"{md_escape(key.removeprefix('metrics.'))} {value} {crossed}")
    return said


def named_verdict(row: Row, most: int = 3) -> str:
    """The verdict naming its first ``most`` failing rules: ``FAIL (video/mean_rel_err ...)``."""
    verdict, said = field(row, "verdict"), failed_rules(row)
    more = [f"+{len(said) - most} …"] if len(said) > most else []
    return f"FAIL ({', '.join(said[:most] + more)})" if verdict == "FAIL" and said else verdict


def size_label(row: Row) -> str:
    """``HxW``, ``HxWxF`` when the task uses frames, or a layer's ``input [1,128,2,8,8]``."""
    shape = get(row, "job.sizes.input_shape")
    if shape is not None and get(row, "job.sizes.height") is None:
        return f"input {shape}".replace(", ", ",")
    height, width, frames = (get(row, f"job.{k}") for k in ("height", "width", "num_frames"))
    if height is None or width is None:
        return MISSING
    label = f"{num(height)}x{num(width)}"
    return f"{label}x{num(frames)}" if frames is not None else label


def workload_label(row: Row) -> str:
    """``mini @ 1024x1024``: the preset with the size that ran (an override shows as what ran)."""
    preset, size = get(row, "job.preset"), size_label(row)
    if preset is None:
        return size
    return md_escape(preset) if size == MISSING else f"{md_escape(preset)} @ {size}"


LABELS: dict[str, Callable[[Row], str]] = {"size": size_label, "workload": workload_label}


def field(row: Row, key: str) -> str:
    """The cell of record key ``key``: its value as :func:`text`."""
    return text(get(row, key))


def cells(row: Row, keys: Iterable[str]) -> list[str]:
    """The row's ``keys`` as cells: ``size``/``workload`` labels, a record key's :func:`field`."""
    return [LABELS[k](row) if k in LABELS else field(row, k) for k in keys]


def group(rows: Iterable[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    """Rows by ``key(row)``, groups and rows in first-seen order."""
    groups: dict[Any, list[Row]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return groups


def metric_fields(row: Row, field: str = "value", layers: bool = False) -> dict[str, Any]:
    """``{name: value}`` of ``metrics.<name>.<field>`` (``layer/`` ones with ``layers``)."""
    tail = f".{field}"
    return {k[8:-len(tail)]: v for k, v in row.items()
            if k.startswith("metrics.") and k.endswith(tail) and present(v)
            and (layers or not k.startswith("metrics.layer/"))}


def metric_matches(name: str, wanted: str) -> bool:
    """True when ``name`` is metric ``wanted``, maybe namespaced (``image/x``, ``image_x``)."""
    base = name.split("/")[-1]
    return not name.startswith("layer/") and (base == wanted or base.endswith("_" + wanted))


def times(ratio: float) -> str:
    """A ratio as ``3533x`` (whole numbers from 100 up) or ``2.41x``."""
    if math.isinf(ratio):
        return "infx"
    return f"{ratio:.0f}x" if abs(ratio) >= 100 else f"{ratio:.3g}x"


def link(label: str, target: Path | str, base_dir: Path | str) -> str:
    """A Markdown link to ``target``, relative to ``base_dir`` with forward slashes."""
    rel = Path(os.path.relpath(Path(target).resolve(), Path(base_dir).resolve())).as_posix()
    return f"[{label}](<{rel}>)" if any(c in rel for c in " ()<>") else f"[{label}]({rel})"


def record_link(row: Row, base_dir: Path) -> str:
    """Link named ``record`` to the row's record file."""
    return link("record", row["record"], base_dir)


def inside(root: Path | str, rel: str) -> Path | None:
    """``root / rel`` resolved, or None when it leaves ``root`` (absolute, ``../``, a link out)."""
    base = Path(root).resolve()
    path = (base / rel).resolve()
    return path if path == base or base in path.parents else None


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], notes: Iterable[str] = ()) -> str:
    """A GitHub-flavoured Markdown table (cells already text), then ``notes`` as a list under it."""
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    notes = bullets(notes)
    return "\n".join(lines) + (f"\n\n{notes}" if notes else "")


def bullets(notes: Iterable[str | None]) -> str:
    """The notes that are not None as a Markdown list."""
    return "\n".join(f"- {n}" for n in notes if n)


def word(key: str, lang: str, **fill: str) -> str:
    """The word ``key`` in ``lang`` (``en`` or ``zh``), its ``{placeholders}`` filled."""
    text = WORDS[key][LANGS.index(lang)] if lang in LANGS else WORDS[key][0]
    return text.format(**fill) if fill else text


def value_word(value: Any, lang: str) -> str:
    """A record's word (``loaded``, ``random-init``, ``not applied``) in ``lang``, else as text."""
    key = f"v_{value}".replace(" ", "_")
    return word(key, lang) if key in WORDS else text(value)


def machines(rows: Rows) -> list[str]:
    """Distinct host names among the rows."""
    return sorted({str(get(r, "env.hostname")) for r in rows})


def identity(rows: Rows, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(headers, keys) of ``names`` (``machine`` with several hosts, ``steps`` if used)."""
    many = len(machines(rows)) > 1
    steps = any(get(r, "job.steps") is not None for r in rows)
    kept = [n for n in names if (n != "machine" or many) and (n != "steps" or steps)]
    return kept, [IDENTITY[n] for n in kept]


def fold_same(headers: list[str], body: list[list[str]], foldable: Sequence[str]
              ) -> tuple[list[str], list[list[str]], list[str]]:
    """Drop the ``foldable`` columns saying one thing in every row; notes say it once."""
    if len(body) < 2:
        return headers, body, []
    drop = [i for i, h in enumerate(headers) if h in foldable and len({r[i] for r in body}) == 1]
    keep = [i for i in range(len(headers)) if i not in drop]
    notes = [f"every row: {headers[i]} {body[0][i]}" for i in drop]
    return [headers[i] for i in keep], [[r[i] for i in keep] for r in body], notes


def primary_output(row: Row) -> str | None:
    """The output the job's task leads with (``video``, ``reconstruction``), if declared."""
    output = get(row, "job.primary.output")
    return str(output) if output is not None else None


def section_metric(row: Row, section: str, wanted: Sequence[str] = ()) -> str | None:
    """The metric answering ``section``: the task's declared one, else the one unambiguous match."""
    names, output = list(metric_fields(row)), primary_output(row)
    declared = get(row, f"job.primary.{section}")
    if declared is not None:
        name = str(declared)
        candidates = [name] if "/" in name else ([f"{output}/{name}"] if output else []) + [name]
        return next((c for c in candidates if c in names), None)
    for want in wanted:
        found = [n for n in names if metric_matches(n, want)]
        exact = [n for n in found if n.rsplit("/", 1)[-1] == want]
        for pool in (exact, found):
            if output:
                pool = [n for n in pool if n.startswith(f"{output}/") or "/" not in n] or pool
            if len(pool) == 1:
                return pool[0]
        if found:
            return None  # several outputs' metrics match and nothing says which one is meant
    return None


MEDIA = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".mp4")


def media_files(row: Row) -> list[tuple[str, Path]]:
    """(name, path) of the image/heatmap/video artifacts a record lists inside its job dir."""
    found = []
    for name, value in sorted(json_of(row.get("artifacts"), dict).items()):
        paths = value if isinstance(value, list) else [value]
        media = [p for p in paths if isinstance(p, str) and p.lower().endswith(MEDIA)]
        for i, rel in enumerate(media):
            path = inside(Path(row["job_dir"]), rel)
            if path is not None:  # an absolute, ../ or linked-out path points elsewhere: not listed
                found.append((name if len(paths) == 1 else f"{name}[{i}]", path))
    return found


def json_of(value: Any, kind: type) -> Any:
    """A value the flat row holds as JSON text, when it is of ``kind`` (else an empty one)."""
    try:
        found = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        found = None
    return found if isinstance(found, kind) else kind()


def yaml_strings(path: Path, *keys: str) -> list[str] | None:
    """The list of strings at ``keys`` of a YAML file read as data (no link followed), or None."""
    try:  # a regular file only: no link followed, no FIFO read
        plain = path.is_file() and not path.is_symlink()
        value = yaml.safe_load(path.read_text()) if plain else None
    except (OSError, ValueError, yaml.YAMLError):  # unreadable, not UTF-8, not YAML
        return None
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    ok = isinstance(value, list) and all(isinstance(o, str) for o in value)
    return value if ok else None


def measured(row: Mapping[str, Any]) -> bool:
    """True for a record that finished ok and is not a dry run."""
    return get(row, "status") == "ok" and get(row, "run") != DRY_RUN
