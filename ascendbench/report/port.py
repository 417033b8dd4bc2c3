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
from ascendbench.report.fmt import get, link, md_escape, num, short, table, text
from ascendbench.report.html import html_document
from ascendbench.report.plots import safe_name
from ascendbench.report.seedlayer import PROFILES, task_of
from ascendbench.report.select import perf_only

Rows = Sequence[Mapping[str, Any]]
TITLES = {"overview": ("Overview", "模型概述"), "environment": ("Environment", "适配环境"),
          "reproduce": ("How to reproduce", "复现方法"), "smoke": ("Smoke run", "Smoke 验证"),
          "accuracy": ("Accuracy", "精度评测"), "performance": ("Performance", "性能测试"),
          "issues": ("Known issues", "注意事项"), "limits": ("Limitations", "限制")}
PERFORMANCE_LAYOUTS = ("flux2_performance", "flux2_speedup", "sulphur2_performance")
DTYPES = ("float32", "float16", "bfloat16")


def _title(key: str, lang: str) -> str:
    return TITLES[key][1 if lang == "zh" else 0]


def overview(rows: Rows, all_rows: Rows) -> str:
    """Task, architecture, parameters, weights and digest of the model (from the latest ok record)."""
    row = rows[-1]
    config = _config(row)
    loader = (config.get("model") or {}).get("loader") or {}
    items = [("model", text(get(row, "job.model"))), ("task", text(task_of(row))),
             ("architecture", text(loader.get("class_path") or loader.get("_target_"))),
             ("parameters", num(get(row, "weights.num_params"))),
             ("weights", f"{text(get(row, 'weights.kind'))} {text(get(row, 'weights.source') or '')}".strip()),
             ("digest", text(get(row, "weights.digest") or f"none (seed {num(get(row, 'weights.init_seed'))})")),
             ("records", f"{len(all_rows)} ({len(rows)} ok)")]
    check = get(row, "weights.digest_check")
    if check:
        items.append(("expected digest", f"{text(get(row, 'weights.expected_digest'))}: {check}"))
    return table(["item", "value"], [[k, v] for k, v in items if v not in ("missing", "")])


def environment(rows: Rows) -> str:
    """One row per machine: host, device, driver, CANN, python, torch, torch_npu, diffusers, transformers."""
    keys = (("host", "env.hostname"), ("device", "env.device.name"), ("driver", "env.drivers"), ("CANN", "env.cann"),
            ("python", "env.python"), ("torch", "env.libraries.torch"), ("torch_npu", "env.libraries.torch_npu"),
            ("diffusers", "env.libraries.diffusers"), ("transformers", "env.libraries.transformers"))
    present = [(h, k) for h, k in keys if any(get(r, k) is not None for r in rows)]
    body = {tuple(short(text(get(r, k)), 60) for _, k in present) for r in rows}
    return table([h for h, _ in present], sorted(body))


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
        return ("The records' job directories hold no `.hydra/overrides.yaml`, so the commands are not known; "
                f"the resolved config of each job is in its record.json. Report: `{report}`")
    return "\n".join(code_item(line) for line in lines + [report])


def smoke(rows: Rows, base_dir: Path) -> str:
    """The first job's end-of-job summary, rebuilt from its record."""
    first = min(rows, key=lambda r: str(get(r, "timing.started_at") or ""))
    try:
        record = json.loads(read_regular(Path(str(first["record"]))))  # a regular file only: never a FIFO
    except (OSError, ValueError):
        return f"The first record ({link('record', first['record'], base_dir)}) cannot be read again."
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
    return ("Every ok record is a performance-only run (baseline.enabled=false): nothing was judged." if not
            performance else "No ok record holds a latency.")


def known_issues(rows: Rows, failed: Rows) -> list[str]:
    """Failed jobs, FAIL verdicts, skipped metrics, warnings, placement findings and random-init weights."""
    issues = [f"failed job ({text(get(r, 'job.dtype'))} {text(get(r, 'job.preset'))}): "
              f"{text(get(r, 'error.type'))}: {short(get(r, 'error.message'), 200)}" for r in failed]
    for row in rows:
        label = f"{text(get(row, 'job.device'))} {text(get(row, 'job.dtype'))} {text(get(row, 'job.preset'))}"
        bad = [k[len("metrics."):-len(".verdict")] for k in row if k.startswith("metrics.") and k.endswith(".verdict")
               and get(row, k) == "FAIL"]
        if bad:
            issues.append(f"{label}: FAIL on {len(bad)} metric(s): {', '.join(bad[:6])}" + (" ..." if len(bad) > 6
                                                                                        else ""))
        found = get(row, "metrics.placement_findings.value")
        if found:
            issues.append(f"{label}: {num(found)} placement finding(s) (CPU fallback or mixed devices)")
    skipped: dict[str, set[str]] = {}
    for row in rows:
        for key in (k for k in row if k.startswith("metrics.") and k.endswith(".skipped") and get(row, k)):
            skipped.setdefault(str(get(row, key)), set()).add(key[len("metrics."):-len(".skipped")])
    issues += [f"skipped {', '.join(sorted(names))}: {short(reason, 300)}" for reason, names in skipped.items()]
    warnings = {w for row in rows for w in _list(get(row, "warnings"))}
    issues += [f"warning: {short(w, 200)}" for w in sorted(warnings)]
    return issues or ["None in the records: no failed job, FAIL verdict, skipped metric, warning or placement "
                      "finding."]


def limitations(rows: Rows) -> list[str]:
    """What the records do not cover, each said from the records."""
    devices = sorted({text(get(r, "job.device")) for r in rows})
    dtypes = sorted({text(get(r, "job.dtype")) for r in rows})
    notes = [f"measured on: {', '.join(devices)}; dtypes: {', '.join(dtypes)}"]
    if devices == ["cpu"]:
        notes.append("no accelerator run in these records: no speed-up over the CPU, no device memory")
    missing = [d for d in DTYPES if d not in dtypes]
    if missing:
        notes.append(f"dtypes not measured: {', '.join(missing)}")
    random = sum(1 for r in rows if get(r, "weights.kind") == "random-init")
    if random:
        notes.append(f"{random} of {len(rows)} record(s) ran random-init weights: their numbers describe the "
                     "architecture in that dtype, not a released checkpoint")
    perf = sum(1 for r in rows if perf_only(r))
    if perf:
        notes.append(f"{perf} record(s) are performance-only (baseline.enabled=false): no accuracy")
    references = sorted({text(get(r, "job.reference_dtype")) for r in rows if not perf_only(r)})
    if references:
        notes.append(f"reference precision: {', '.join(references)}")
    if not any(k.startswith("hidden.") for r in rows for k in r if get(r, k) is not None):
        notes.append("no hidden-state comparison (compare.layers off in every record)")
    return notes


def _list(value: Any) -> list[str]:
    """The row's ``warnings`` (joined by `` | `` in the flat row) as a list."""
    return [w for w in str(value).split(" | ") if w.strip()] if value else []


def _config(row: Mapping[str, Any]) -> dict[str, Any]:
    try:
        config = json.loads(row.get("config") or "{}")
    except (TypeError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def port_markdown(model: str, ok: Rows, failed: Rows, context: Mapping[str, Any]) -> str:
    """The whole document of one model (``context``: ``lang``, ``base_dir``, ``sources``)."""
    lang, base_dir = context["lang"], Path(context["base_dir"])
    sections = {"overview": overview(ok, [*ok, *failed]), "environment": environment([*ok, *failed]),
                "reproduce": reproduce([*ok, *failed], context["sources"], lang), "smoke": smoke(ok, base_dir),
                "accuracy": layouts(ok, lang, base_dir, performance=False),
                "performance": layouts(ok, lang, base_dir, performance=True),
                "issues": "\n".join(f"- {i}" for i in known_issues(ok, failed)),
                "limits": "\n".join(f"- {n}" for n in limitations(ok))}
    head = f"# {md_escape(model)}\n\n" + (f"{len(ok)} ok record(s), {len(failed)} failed; every fact below is read "
                                          "from a record.json or its job directory.")
    return head + "\n\n" + "\n\n".join(f"## {_title(k, lang)}\n\n{v}" for k, v in sections.items()) + "\n"


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
