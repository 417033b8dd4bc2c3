"""The port report (``--port``): ``<out>/port/<model>.md`` and ``.html`` from records."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from ascendbench.fileio import read_regular, write_atomic
from ascendbench.job.summary import summary_lines
from ascendbench.report import fmt
from ascendbench.report.decoderswap import swap_section
from ascendbench.report.html import html_document
from ascendbench.report.performance import started_key
from ascendbench.report.plots import safe_name
from ascendbench.report.seedlayer import PROFILES, task_of
from ascendbench.report.seedlayouts import flux2_performance
from ascendbench.report.select import perf_only

PERFORMANCE_LAYOUTS = ("flux2_performance", "flux2_speedup", "sulphur2_performance")
ENV_KEYS = (("p_host", "env.hostname"), ("p_chip", "env.device.name"), ("p_driver", "env.drivers"),
            ("CANN", "env.cann"), ("Python", "env.python"), ("torch", "env.libraries.torch"),
            ("torch_npu", "env.libraries.torch_npu"), ("diffusers", "env.libraries.diffusers"),
            ("transformers", "env.libraries.transformers"))
SHOWN = 4  # pictures shown per model; the others are links


def overview(rows: fmt.Rows, all_rows: fmt.Rows, lang: str) -> str:
    """Task, architecture, parameters, weights, their digest and each file's sha256sum."""
    row = rows[-1]
    loader = (fmt.json_of(row.get("config"), dict).get("model") or {}).get("loader") or {}
    digest, patches = (fmt.get(row, k) for k in ("weights.digest", "pipeline.patches_applied"))
    items = [("p_model", fmt.field(row, "job.model")), ("p_task", fmt.text(task_of(row))),
             ("p_architecture", fmt.text(fmt.get(row, "weights.module") or loader.get(
                 "class_path") or loader.get("_target_"))),
             ("p_patches", fmt.text(", ".join(fmt.json_of(patches, list)))),
             ("p_parameters", fmt.field(row, "weights.num_params")),
             ("p_weights", f"{fmt.value_word(fmt.get(row, 'weights.kind'), lang)} "
                           f"{fmt.text(fmt.get(row, 'weights.source') or '')}".strip())]
    if digest is None:
        no_digest = fmt.word("p_no_digest", lang, seed=fmt.field(row, "weights.init_seed"))
        items.append(("weights.digest", no_digest))
    else:
        label = "p_tensor_digest" if fmt.get(row, "weights.prefix") is not None else "p_digest"
        items.append((label, fmt.text(digest)))
        sizes = fmt.json_of(fmt.get(row, "weights.file_bytes"), list)
        for i, line in enumerate(fmt.json_of(fmt.get(row, "weights.sha256sum"), list)):
            size = (f" ({fmt.num(sizes[i])} {fmt.word('p_bytes', lang)})"
                    if i < len(sizes) and isinstance(sizes[i], int) else "")
            items.append(("sha256sum", f"{fmt.md_escape(str(line))}{size}"))
    items.append(("records", fmt.word("p_records_ok", lang, n=str(len(all_rows)),
                                      ok=str(len(rows)))))
    if fmt.get(row, "weights.digest_check"):
        items.append(("p_expected", f"{fmt.field(row, 'weights.expected_digest')}: "
                                    f"{fmt.get(row, 'weights.digest_check')}"))
    body = [[fmt.word(k, lang) if k in fmt.WORDS else k, v] for k, v in items
            if v not in (fmt.MISSING, "")]
    return fmt.table([fmt.word("p_item", lang), fmt.word("p_value", lang)], body)


def environment(rows: fmt.Rows, lang: str) -> str:
    """One row per machine; a value a record lacks names the key it did not record."""
    shown = [(h, k) for h, k in ENV_KEYS if any(fmt.get(r, k) is not None for r in rows)]
    body = {tuple(fmt.short(fmt.field(r, k), 60) if fmt.get(r, k) is not None
                  else fmt.word("p_not_recorded", lang, field=k) for _, k in shown) for r in rows}
    return fmt.table([fmt.word(h, lang) if h in fmt.WORDS else h for h, _ in shown], sorted(body))


def code_item(line: str) -> str:
    """A list item showing ``line`` as code (escaped text when it holds a backtick)."""
    return f"- {fmt.md_escape(line)}" if "`" in line else f"- `{line}`"


def reproduce(rows: fmt.Rows, sources: Sequence[str], lang: str) -> str:
    """The sweep of each job (its ``multirun.yaml``) or the job itself (``.hydra/overrides.yaml``),
    read as data, as one command each; then the report's."""
    lines: list[str] = []
    sweeps: dict[Path, list[str] | None] = {}
    for row in rows:
        job = Path(str(row["record"])).parent
        if job.parent not in sweeps:  # Hydra's record of the sweep's command line
            sweeps[job.parent] = fmt.yaml_strings(job.parent / "multirun.yaml", "hydra",
                                               "overrides", "task")
        sweep, overrides = sweeps[job.parent], fmt.yaml_strings(job / ".hydra" / "overrides.yaml")
        if sweep is not None or overrides is not None:
            line = "python -m ascendbench " + "-m " * (sweep is not None) + " ".join(
                shlex.quote(o) for o in (sweep if sweep is not None else overrides))
            lines += [line] if line not in lines else []
    report = (f"python -m ascendbench.report --port {' '.join(shlex.quote(s) for s in sources)} "
              f"--lang {lang}")
    if not lines:
        return f"{fmt.word('p_no_commands', lang)} {fmt.word('p_report_cmd', lang)}: `{report}`"
    return "\n".join(code_item(line) for line in lines + [report])


def smoke(rows: fmt.Rows, base_dir: Path, lang: str) -> str:
    """The first job's end-of-job summary, rebuilt from its record."""
    first = Path(str(min(rows, key=started_key)["record"]))
    link = fmt.link(fmt.word("p_record", lang), first, base_dir)
    try:
        record = json.loads(read_regular(first))  # a regular file only: never a FIFO
    except (OSError, ValueError):
        return fmt.word("p_reread", lang, link=link)
    lines = [line for line in summary_lines(record, first.name) if not line.startswith("record")]
    return "\n".join([code_item(line) for line in lines] + [f"- {link}"])


def layouts(rows: fmt.Rows, lang: str, base_dir: Path, performance: bool) -> str:
    """The model's seed layouts of one kind (accuracy or performance), each under its title."""
    parts, section = [], fmt.word("p_performance" if performance else "p_accuracy", lang)
    for name, en, zh, render in PROFILES.get(task_of(rows[-1]), ()):
        if (name in PERFORMANCE_LAYOUTS) == performance and (body := render(rows, lang, base_dir)):
            title = zh if lang == "zh" else en  # no sub-heading repeating the section's own
            parts.append(body if title == section else f"### {title}\n\n{body}")
    if performance and not parts:
        parts = [body] if (body := flux2_performance(rows, lang, base_dir)) else []
    if parts:
        return "\n\n".join(parts)
    return fmt.word("p_no_latency" if performance else "p_perf_only", lang)


def shown_pictures(rows: fmt.Rows) -> tuple[fmt.Row, list[tuple[str, Path]]]:
    """The worst judged workload and the first side-by-side picture (else frame) of each output it
    lists inside its job directory (:func:`media_files`), :data:`SHOWN` at most."""
    judged = sorted((r for r in rows if fmt.get(r, "verdict") in ("PASS", "FAIL")),
                    key=lambda r: fmt.get(r, "verdict") != "FAIL") or [{}]
    first: dict[str, Path] = {}
    for name, path in fmt.media_files(judged[0]) if judged[0] else ():
        if path.suffix.lower() == ".png" and path.is_file():
            first.setdefault(name.split("[")[0], path)
    compare = [(n, p) for n, p in first.items() if n.endswith("_compare_png")]
    return judged[0], (compare or list(first.items()))[:SHOWN]


def pictures(rows: fmt.Rows, base_dir: Path, lang: str) -> str:
    """:func:`shown_pictures` shown, every other picture and video of the jobs as a link."""
    worst, shown = shown_pictures(rows)
    where = [str(fmt.get(worst, k) or "") for k in ("job.device", "job.dtype", "job.preset")]
    parts = ["!" + fmt.link(fmt.md_escape(re.sub(r"[\[\]]", "", " ".join(  # alt: record text
        [name, *where, fmt.size_label(worst)]))), path, base_dir) for name, path in shown]
    rest = [f"- {fmt.workload_label(r)}: " + " ".join(links) for r in rows
            if (links := [fmt.link(fmt.md_escape(n), p, base_dir) for n, p in fmt.media_files(r)
                          if p.is_file() and p not in dict(shown).values()])]
    parts += ["\n".join(rest)] if rest else []
    return "\n\n".join(parts) or fmt.word("p_no_pictures", lang)


def known_issues(rows: fmt.Rows, failed: fmt.Rows, lang: str) -> list[str]:
    """Failed jobs, FAIL verdicts, skipped metrics, warnings, placement findings."""
    issues = [f"{fmt.word('p_failed_job', lang)} ({fmt.field(r, 'job.dtype')} "
              f"{fmt.workload_label(r)}): "
              + fmt.log_text(f"{fmt.get(r, 'error.type')}: {fmt.get(r, 'error.message')}", 200)
              for r in failed]
    skipped: dict[str, set[str]] = {}
    for row in rows:
        label = f"{' '.join(fmt.cells(row, ['job.device', 'job.dtype']))} {fmt.workload_label(row)}"
        if fmt.get(row, "verdict") == "FAIL":
            issues.append(f"{label}: {fmt.named_verdict(row, most=6)}")
        if fmt.get(row, "metrics.placement_findings.value"):
            found = fmt.field(row, "metrics.placement_findings.value")
            issues.append(f"{label}: {fmt.word('p_placement', lang, n=found)}")
        for name, reason in fmt.metric_fields(row, "skipped", True).items():
            if reason:
                skipped.setdefault(str(reason), set()).add(name)
    runs = Counter(issues)  # the same line from repeated runs: once, with its count
    issues = [f"{line} (x{runs[line]})" if runs[line] > 1 else line for line in runs]
    issues += [f"{fmt.word('p_skipped', lang)} {', '.join(sorted(names))}: "
               f"{fmt.log_text(reason, 300)}"
               for reason, names in skipped.items()]
    warnings = {w for row in rows for w in str(fmt.get(row, "warnings") or "").split(" | ")
                if w.strip()}
    issues += [f"{fmt.word('p_warning', lang)}: {fmt.log_text(w, 200)}" for w in sorted(warnings)]
    return issues or [fmt.word("p_no_issues", lang)]


def limitations(rows: fmt.Rows, lang: str) -> list[str]:
    """What the records do not cover, each said from the records."""
    devices = sorted({fmt.field(r, "job.device") for r in rows})
    dtypes = sorted({fmt.field(r, "job.dtype") for r in rows})
    missing = [d for d in ("float32", "float16", "bfloat16") if d not in dtypes]
    random = sum(1 for r in rows if fmt.get(r, "weights.kind") == "random-init")
    perf = sum(1 for r in rows if perf_only(r))
    references = sorted({fmt.field(r, "job.reference_dtype") for r in rows if not perf_only(r)})
    hidden = any(k.startswith("hidden.") for r in rows for k in r if fmt.get(r, k) is not None)
    return [n for n in (
        fmt.word("p_measured_on", lang, devices=", ".join(devices), dtypes=", ".join(dtypes)),
        fmt.word("p_cpu_only", lang) if devices == ["cpu"] else None,
        fmt.word("p_dtypes_missing", lang, dtypes=", ".join(missing)) if missing else None,
        fmt.word("p_random", lang, n=str(random), total=str(len(rows))) if random else None,
        fmt.word("p_perf_records", lang, n=str(perf)) if perf else None,
        fmt.word("p_reference", lang, dtypes=", ".join(references)) if references else None,
        None if hidden else fmt.word("p_no_hidden", lang)) if n]


def port_markdown(model: str, ok: fmt.Rows, failed: fmt.Rows, context: dict[str, Any]) -> str:
    """The whole document of one model (``context``: ``lang``, ``base_dir``, ``sources``)."""
    lang, base_dir, every = context["lang"], Path(context["base_dir"]), [*ok, *failed]
    sections = {"overview": overview(ok, every, lang), "environment": environment(every, lang),
                "reproduce": reproduce(every, context["sources"], lang),
                "smoke": smoke(ok, base_dir, lang),
                "accuracy": layouts(ok, lang, base_dir, performance=False),
                "pictures": pictures(ok, base_dir, lang),
                "performance": layouts(ok, lang, base_dir, performance=True),
                "issues": fmt.bullets(known_issues(ok, failed, lang)),
                "limits": fmt.bullets(limitations(ok, lang))}
    if (swap := swap_section(ok, base_dir, lang=lang)) != fmt.word("s_none", lang):
        sections["decoder_swap"] = swap  # only where a workload ran with both decoders
    head = f"# {fmt.md_escape(model)}\n\n" + fmt.word("p_head", lang, ok=str(len(ok)),
                                               failed=str(len(failed)))
    body = "\n\n".join(f"## {fmt.word('p_' + k, lang)}\n\n{v}" for k, v in sections.items())
    # a table cell the layouts left ``missing`` says, in the document's language, what it lacks
    bare, said = f"| {fmt.MISSING} |", f"| {fmt.word('p_not_in_record', lang)} |"
    return (head + "\n\n" + body + "\n").replace(bare, said).replace(bare, said)


def write_port(report: Any, out_dir: Path) -> list[Path]:
    """``<out>/port/<model>.md`` and ``.html`` for every model with an ok record; the files."""
    port_dir = Path(out_dir) / "port"
    port_dir.mkdir(parents=True, exist_ok=True)
    failed_rows = [r for r in report.frame.to_dict("records") if fmt.get(r, "status") == "failed"]
    context = {"lang": str(report.settings.lang), "base_dir": port_dir, "sources": report.sources}
    html = report.settings.html
    written = []
    for model in report.models:
        ok, failed = report.of(model), [r for r in failed_rows if fmt.get(r, "job.model") == model]
        markdown = port_markdown(model, ok, failed, context)
        shown = [path for _, path in shown_pictures(ok)[1]]  # embedded; the rest stay links
        page = html_document(markdown, port_dir, html.embed_max_mb, html.embed_total_mb, shown,
                             lang=context["lang"])
        written += [write_atomic(port_dir / f"{safe_name(model)}{suffix}", content)
                    for suffix, content in ((".md", markdown), (".html", page))]
    return written
