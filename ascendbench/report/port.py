"""The port report: one README-shaped document per model, in the seeds' structure, every fact from a record.

``python -m ascendbench.report --port [PATHS] [--lang zh]`` (``make report PORT=1``) writes
``<out>/port/<model>.md`` and ``.html``: overview (task, architecture, parameters, weights and their digest),
environment (versions, device, driver, CANN), how to reproduce (the exact command lines, from each job's
``.hydra/overrides.yaml``), smoke (the first job's summary, from its record), accuracy and performance (the
seed layouts of the model's task, :mod:`ascendbench.report.seedlayer`), known issues (failed jobs, FAIL
verdicts, skipped metrics, warnings, placement findings, random-init weights) and limitations (what the
records do not cover: devices, dtypes, reference, hidden states). Sentences are templates filled from records;
a section the records say nothing about states that as a fact.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from ascendbench.fileio import read_regular, write_atomic
from ascendbench.job.summary import summary_lines
from ascendbench.report.fmt import MISSING, get, link, md_escape, num, short, table, text, workload_label
from ascendbench.report.html import html_document
from ascendbench.report.performance import started_key
from ascendbench.report.plots import safe_name
from ascendbench.report.seedlayer import PROFILES, task_of
from ascendbench.report.select import perf_only
from ascendbench.report.words import WORDS, word

Rows = Sequence[Mapping[str, Any]]
PERFORMANCE_LAYOUTS = ("flux2_performance", "flux2_speedup", "sulphur2_performance")
DTYPES = ("float32", "float16", "bfloat16")


def overview(rows: Rows, all_rows: Rows, lang: str) -> str:
    """Task, architecture, parameters, weights, their digest and each file's sha256sum (from the latest ok record)."""
    row = rows[-1]
    config = _config(row)
    loader = (config.get("model") or {}).get("loader") or {}
    items = [("p_model", text(get(row, "job.model"))), ("p_task", text(task_of(row))),
             ("p_architecture", text(loader.get("class_path") or loader.get("_target_"))),
             ("p_parameters", num(get(row, "weights.num_params"))),
             ("p_weights", f"{text(get(row, 'weights.kind'))} {text(get(row, 'weights.source') or '')}".strip()),
             *digest_items(row, lang), ("records", f"{len(all_rows)} ({len(rows)} ok)")]
    check = get(row, "weights.digest_check")
    if check:
        items.append(("p_expected", f"{text(get(row, 'weights.expected_digest'))}: {check}"))
    body = [[word(k, lang) if k in WORDS else k, v] for k, v in items if v not in (MISSING, "")]
    return table([word("p_item", lang), word("p_value", lang)], body)


def digest_items(row: Mapping[str, Any], lang: str) -> list[tuple[str, str]]:
    """The weights' identity: ``weights.digest`` labelled with what it covers, then each file's ``sha256sum``
    (``<hex>  <file>``, what a model card or a seed quotes) with its size, when the loader recorded them."""
    digest = get(row, "weights.digest")
    if digest is None:
        return [("weights.digest", word("p_no_digest", lang, seed=num(get(row, "weights.init_seed"))))]
    label = "p_tensor_digest" if get(row, "weights.prefix") is not None else "p_digest"
    lines, sizes = _json_list(get(row, "weights.sha256sum")), _json_list(get(row, "weights.file_bytes"))
    items = [(label, text(digest))]
    for i, line in enumerate(lines):
        size = f" ({num(sizes[i])} {word('p_bytes', lang)})" if i < len(sizes) and isinstance(sizes[i], int) else ""
        items.append(("sha256sum", f"{md_escape(str(line))}{size}"))
    return items


def environment(rows: Rows, lang: str) -> str:
    """One row per machine: host, device, driver, CANN, python, torch, torch_npu, diffusers, transformers; a
    value one record lacks says which key it did not record."""
    keys = (("p_host", "env.hostname"), ("p_chip", "env.device.name"), ("p_driver", "env.drivers"),
            ("CANN", "env.cann"), ("Python", "env.python"), ("torch", "env.libraries.torch"),
            ("torch_npu", "env.libraries.torch_npu"), ("diffusers", "env.libraries.diffusers"),
            ("transformers", "env.libraries.transformers"))
    present = [(h, k) for h, k in keys if any(get(r, k) is not None for r in rows)]
    body = {tuple(short(text(get(r, k)), 60) if get(r, k) is not None else word("p_not_recorded", lang, field=k)
                  for _, k in present) for r in rows}
    return table([word(h, lang) if h in WORDS else h for h, _ in present], sorted(body))


def commands(rows: Rows) -> list[str]:
    """The command line of each job, from its ``.hydra/overrides.yaml`` (read as data), without repeats."""
    found: list[str] = []
    for row in rows:
        path = Path(str(row["record"])).parent / ".hydra" / "overrides.yaml"
        try:
            overrides = yaml.safe_load(path.read_text()) if path.is_file() else None
        except (OSError, yaml.YAMLError):
            overrides = None
        if isinstance(overrides, list) and all(isinstance(o, str) for o in overrides):
            line = "python -m ascendbench " + " ".join(shlex.quote(o) for o in overrides)
            if line not in found:
                found.append(line)
    return found


def code_item(line: str) -> str:
    """A list item showing ``line`` as code; a line holding a backtick (record text could close the code span
    and let the rest through as Markdown) is Markdown-escaped text instead."""
    return f"- {md_escape(line)}" if "`" in line else f"- `{line}`"


def reproduce(rows: Rows, sources: Sequence[str], lang: str) -> str:
    """The exact commands (a code block), then the report's own command."""
    lines = commands(rows)
    report = f"python -m ascendbench.report --port {' '.join(shlex.quote(s) for s in sources)} --lang {lang}"
    if not lines:
        return f"{word('p_no_commands', lang)} {word('p_report_cmd', lang)}: `{report}`"
    return "\n".join(code_item(line) for line in lines + [report])


def smoke(rows: Rows, base_dir: Path, lang: str) -> str:
    """The first job's end-of-job summary, rebuilt from its record."""
    first = min(rows, key=started_key)
    try:
        record = json.loads(read_regular(Path(str(first["record"]))))  # a regular file only: never a FIFO
    except (OSError, ValueError):
        return word("p_reread", lang, link=link("record", first["record"], base_dir))
    lines = [line for line in summary_lines(record, Path(str(first["record"])).name) if not line.startswith("record")]
    return "\n".join(code_item(line) for line in lines) + "\n- " + link("record", first["record"], base_dir)


def layouts(rows: Rows, lang: str, base_dir: Path, performance: bool) -> str:
    """The model's seed layouts of one kind (accuracy or performance), each under its seed title."""
    parts = []
    for name, en, zh, render in PROFILES.get(task_of(rows[-1]), ()):
        if (name in PERFORMANCE_LAYOUTS) == performance and (body := render(rows, lang, base_dir)):
            parts.append(f"### {zh if lang == 'zh' else en}\n\n{body}")
    if performance and not parts:
        from ascendbench.report.seedlayouts import flux2_performance

        body = flux2_performance(rows, lang, base_dir)
        parts = [body] if body else []
    if parts:
        return "\n\n".join(parts)
    return word("p_no_latency" if performance else "p_perf_only", lang)


def known_issues(rows: Rows, failed: Rows, lang: str) -> list[str]:
    """Failed jobs, FAIL verdicts, skipped metrics, warnings, placement findings and random-init weights."""
    issues = [f"{word('p_failed_job', lang)} ({text(get(r, 'job.dtype'))} {workload_label(r)}): "
              f"{text(get(r, 'error.type'))}: {short(get(r, 'error.message'), 200)}" for r in failed]
    for row in rows:
        label = f"{text(get(row, 'job.device'))} {text(get(row, 'job.dtype'))} {workload_label(row)}"
        bad = [k[len("metrics."):-len(".verdict")] for k in row if k.startswith("metrics.") and k.endswith(".verdict")
               and get(row, k) == "FAIL"]
        if bad:
            issues.append(f"{label}: {word('p_fail_on', lang, n=str(len(bad)))}: {', '.join(bad[:6])}"
                          + (" ..." if len(bad) > 6 else ""))
        found = get(row, "metrics.placement_findings.value")
        if found:
            issues.append(f"{label}: {word('p_placement', lang, n=num(found))}")
    skipped: dict[str, set[str]] = {}
    for row in rows:
        for key in (k for k in row if k.startswith("metrics.") and k.endswith(".skipped") and get(row, k)):
            skipped.setdefault(str(get(row, key)), set()).add(key[len("metrics."):-len(".skipped")])
    issues += [f"{word('p_skipped', lang)} {', '.join(sorted(names))}: {short(reason, 300)}"
               for reason, names in skipped.items()]
    warnings = {w for row in rows for w in _list(get(row, "warnings"))}
    issues += [f"{word('p_warning', lang)}: {short(w, 200)}" for w in sorted(warnings)]
    return issues or [word("p_no_issues", lang)]


def limitations(rows: Rows, lang: str) -> list[str]:
    """What the records do not cover, each said from the records."""
    devices = sorted({text(get(r, "job.device")) for r in rows})
    dtypes = sorted({text(get(r, "job.dtype")) for r in rows})
    notes = [word("p_measured_on", lang, devices=", ".join(devices), dtypes=", ".join(dtypes))]
    if devices == ["cpu"]:
        notes.append(word("p_cpu_only", lang))
    missing = [d for d in DTYPES if d not in dtypes]
    if missing:
        notes.append(word("p_dtypes_missing", lang, dtypes=", ".join(missing)))
    random = sum(1 for r in rows if get(r, "weights.kind") == "random-init")
    if random:
        notes.append(word("p_random", lang, n=str(random), total=str(len(rows))))
    perf = sum(1 for r in rows if perf_only(r))
    if perf:
        notes.append(word("p_perf_records", lang, n=str(perf)))
    references = sorted({text(get(r, "job.reference_dtype")) for r in rows if not perf_only(r)})
    if references:
        notes.append(word("p_reference", lang, dtypes=", ".join(references)))
    if not any(k.startswith("hidden.") for r in rows for k in r if get(r, k) is not None):
        notes.append(word("p_no_hidden", lang))
    return notes


def _list(value: Any) -> list[str]:
    """The row's ``warnings`` (joined by `` | `` in the flat row) as a list."""
    return [w for w in str(value).split(" | ") if w.strip()] if value else []


def _json_list(value: Any) -> list[Any]:
    """A list the flat row holds as JSON text (``weights.sha256sum``), ``[]`` when absent or not a list."""
    try:
        found = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return []
    return found if isinstance(found, list) else []


def no_bare_missing(markdown: str, lang: str) -> str:
    """A table cell the layouts left ``missing`` says, in the document's language, that the record lacks it."""
    return markdown.replace(f"| {MISSING} |", f"| {word('p_not_in_record', lang)} |").replace(
        f"| {MISSING} |", f"| {word('p_not_in_record', lang)} |")


def _config(row: Mapping[str, Any]) -> dict[str, Any]:
    try:
        config = json.loads(row.get("config") or "{}")
    except (TypeError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def port_markdown(model: str, ok: Rows, failed: Rows, context: Mapping[str, Any]) -> str:
    """The whole document of one model (``context``: ``lang``, ``base_dir``, ``sources``)."""
    lang, base_dir = context["lang"], Path(context["base_dir"])
    sections = {"overview": overview(ok, [*ok, *failed], lang), "environment": environment([*ok, *failed], lang),
                "reproduce": reproduce([*ok, *failed], context["sources"], lang), "smoke": smoke(ok, base_dir, lang),
                "accuracy": layouts(ok, lang, base_dir, performance=False),
                "performance": layouts(ok, lang, base_dir, performance=True),
                "issues": "\n".join(f"- {i}" for i in known_issues(ok, failed, lang)),
                "limits": "\n".join(f"- {n}" for n in limitations(ok, lang))}
    head = f"# {md_escape(model)}\n\n" + word("p_head", lang, ok=str(len(ok)), failed=str(len(failed)))
    body = "\n\n".join(f"## {word('p_' + k, lang)}\n\n{v}" for k, v in sections.items())
    return no_bare_missing(head + "\n\n" + body + "\n", lang)


def write_port(report: Any, out_dir: Path) -> list[Path]:
    """``<out>/port/<model>.md`` and ``.html`` for every model with an ok record; returns the files."""
    port_dir = Path(out_dir) / "port"
    port_dir.mkdir(parents=True, exist_ok=True)
    rows = report.frame.to_dict("records") if not report.frame.empty else []
    context = {"lang": str(report.settings.lang), "base_dir": port_dir, "sources": report.sources}
    written = []
    for model in report.models:
        ok = [r for r in report.rows if get(r, "job.model") == model]
        failed = [r for r in rows if get(r, "job.model") == model and get(r, "status") == "failed"]
        markdown = port_markdown(model, ok, failed, context)
        md = write_atomic(port_dir / f"{safe_name(model)}.md", markdown)  # whole or not at all, as every report file
        page = html_document(markdown, port_dir, report.settings.html.embed_max_mb, report.settings.html.embed_total_mb)
        write_atomic(port_dir / f"{safe_name(model)}.html", page)
        written += [md, port_dir / f"{safe_name(model)}.html"]
    return written
