"""The report: sections rendered from the records' DataFrame, written as report.md, report.html, CSV and plots."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import OutputWriteError, ReportError
from ascendbench.fileio import atomic_path, write_atomic
from ascendbench.report import plots as plotting
from ascendbench.report.crossdevice import crossdevice_section
from ascendbench.report.fmt import get, inside, link, num, size_label, table, text
from ascendbench.report.gather import CONFIG_COLUMN, DRY_RUN
from ascendbench.report.hidden import detail_cells, detail_headers, hidden_metrics, layer_rows, module_rows
from ascendbench.report.html import html_document
from ascendbench.report.output_checks import output_checks_section
from ascendbench.report.performance import performance_table
from ascendbench.report.pivot import pivot_section
from ascendbench.report.profile import profile_section
from ascendbench.report.recommend import recommendation_section
from ascendbench.report.replay import replay_section
from ascendbench.report.resolution import resolution_table
from ascendbench.report.scaling import graph_section, scaling_plots, scaling_section
from ascendbench.report.seedlayer import PROFILE_SECTIONS, layout, seed_layouts_section
from ascendbench.report.select import accuracy_rows, repeats_note, timing_rows
from ascendbench.report.significance import LatencyRule
from ascendbench.report.tables import (
    accuracy_table,
    dry_runs_table,
    environment_table,
    failures_table,
    models,
    ok_rows,
    record_link,
)
from ascendbench.report.variants import variants_section

_MEDIA = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".mp4")


class Report:
    """Everything the report says, computed from one DataFrame of records.

    Args:
        frame: rows from :func:`ascendbench.report.gather.records_frame`.
        settings: the report options (``conf/report.yaml`` with overrides).
        sources: the paths the records were gathered from (named when there are none).
    """

    def __init__(self, frame: pd.DataFrame, settings: DictConfig, sources: Sequence[str]) -> None:
        self.frame = frame
        self.settings = settings
        self.sources = [str(s) for s in sources]
        self.rows = ok_rows(frame)
        self.models = models(frame)
        self.plot_files: list[Path] = []

    @property
    def empty(self) -> bool:
        """True when no record was found at all."""
        return self.frame.empty

    def nothing(self) -> str:
        """The one sentence every section says when there are no records."""
        return (f"No records found under {', '.join(self.sources) or 'the given paths'}: run a job "
                "(`python -m ascendbench ...`) or pass the directories holding record.json files.")

    def counts(self) -> str:
        """``N records: 3 ok, 1 failed, 1 dry-run`` (statuses as the records state them; dry runs apart)."""
        runs = self.frame["run"] if "run" in self.frame.columns else [None] * len(self.frame)
        statuses = Counter(DRY_RUN if run == DRY_RUN and s == "ok" else str(s)
                           for s, run in zip(self.frame["status"], runs, strict=True))
        return f"{len(self.frame)} record(s): " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))

    def make_plots(self, out_dir: Path) -> list[Path]:
        """Write the PNG plots into ``out_dir`` (when enabled) and remember them."""
        if not self.settings.plots or not self.rows:
            return []
        out_dir.mkdir(parents=True, exist_ok=True)
        metric = self.settings.recommendation.error_metric
        for model in self.models:
            mine = [r for r in self.rows if get(r, "job.model") == model]
            for path in (plotting.latency_plot(mine, model, out_dir),
                         plotting.error_plot(mine, model, metric, out_dir)):
                if path is not None:
                    self.plot_files.append(path)
        self.plot_files.extend(scaling_plots(self.rows, out_dir))
        return self.plot_files

    # -- sections (links relative to base_dir) -------------------------------------------------------

    def section(self, name: str, base_dir: Path, heading: str = "###") -> str:
        """One named section (the names README markers use) with links relative to ``base_dir``."""
        if self.empty:
            return self.nothing()
        if name in PROFILE_SECTIONS:
            return layout(name, self.rows, str(self.settings.lang), Path(base_dir)) or (
                f"No record of a task with the `{name}` layout.")
        render = getattr(self, f"_{name}")
        return render(Path(base_dir), heading)

    def _seed_layouts(self, base_dir: Path, heading: str) -> str:
        return seed_layouts_section(self.rows, self.models, str(self.settings.lang), base_dir, heading)

    def _accuracy(self, base_dir: Path, heading: str) -> str:
        if not self.rows:
            return "No job finished ok, so there is no accuracy to show (see the failed jobs)."
        show = list(self.settings.accuracy.show)
        parts = []
        for model in self.models:
            rows = accuracy_rows(ok_rows(self.frame, model))
            if not rows:
                parts.append(f"{heading} {model}\n\nOnly performance runs (baseline.enabled=false): nothing judged.")
                continue
            note = repeats_note(rows)
            parts.append(f"{heading} {model}\n\n" + accuracy_table(rows, show, base_dir)
                         + (f"\n- {note}" if note else ""))
        return "\n\n".join(parts)

    def _per_resolution(self, base_dir: Path, heading: str) -> str:
        options = self.settings.per_resolution
        rows = [r for r in accuracy_rows(self.rows) if get(r, "job.steps") is not None]  # denoising tasks only
        if not rows:
            return ("No judged run of a task with denoising steps (text-to-video, tokenizer), so the Sulphur-2 "
                    "seed's per-resolution table does not apply to these records.")
        if str(self.settings.lang) == "zh":  # the seed's own headers, as its README has them
            return layout("sulphur2_accuracy", rows, "zh", base_dir) or resolution_table(rows, [], [], base_dir)
        return resolution_table(rows, list(options.psnr), list(options.ssim), base_dir)

    def _layers(self, base_dir: Path, heading: str) -> str:
        parts = []
        for model in self.models:
            rows = [r for r in ok_rows(self.frame, model) if layer_rows(r)]
            if rows:
                parts.append(f"{heading} {model}\n\n" + layer_detail_table(rows, base_dir))
        if not parts:
            return "No job compared hidden states (compare.layers), so there is no per-layer detail."
        return ("Per hooked module: the worst value of each check over its calls and outputs, how many entries "
                "failed and the first that did; every entry (layer#call/output) is a row of layers.csv.\n\n"
                + "\n\n".join(parts))

    def _replay(self, base_dir: Path, heading: str) -> str:
        return replay_section(self.rows, base_dir, heading)

    def _output_checks(self, base_dir: Path, heading: str) -> str:
        return output_checks_section(self.rows, base_dir)

    def _dry_runs(self, base_dir: Path, heading: str) -> str:
        return dry_runs_table(self.frame, base_dir)

    def _performance(self, base_dir: Path, heading: str) -> str:
        if not self.rows:
            return "No job finished ok, so there is no performance to show (see the failed jobs)."
        cpu_rows = [r for r in self.rows if get(r, "job.device") == "cpu"]
        cpu_dtype = self.settings.performance.cpu_dtype
        parts = []
        for model in self.models:
            rows = timing_rows(ok_rows(self.frame, model))
            note = repeats_note(rows)
            parts.append(f"{heading} {model}\n\n" + performance_table(rows, cpu_rows, cpu_dtype, base_dir,
                                                                   list(self.settings.performance.show))
                         + (f"\n- {note}" if note else ""))
        return "\n\n".join(parts)

    def _pivot(self, base_dir: Path, heading: str) -> str:
        return pivot_section(self.rows, self.models, base_dir, heading)

    def _profile(self, base_dir: Path, heading: str) -> str:
        return profile_section(self.rows, base_dir, heading)

    def _variants(self, base_dir: Path, heading: str) -> str:
        rule = LatencyRule.from_options(self.settings.compare)
        return variants_section(self.rows, list(self.settings.variants.show), base_dir, heading, rule)

    def _graph(self, base_dir: Path, heading: str) -> str:
        return graph_section(self.rows, base_dir, heading)

    def _scaling(self, base_dir: Path, heading: str) -> str:
        return scaling_section(self.rows, base_dir, heading)

    def _recommendation(self, base_dir: Path, heading: str) -> str:
        if not self.rows:
            return "No job finished ok, so no dtype can be recommended."
        return recommendation_section(self.rows, self.models, self.settings.recommendation.error_metric,
                                      base_dir, heading)

    def _cross_device(self, base_dir: Path, heading: str) -> str:
        limits = OmegaConf.to_container(self.settings.cross_device.limits, resolve=True)
        return crossdevice_section(self.rows, self.settings.cross_device.reference_device, limits, base_dir)

    def _environment(self, base_dir: Path, heading: str) -> str:
        return environment_table(self.frame, base_dir)

    def _failures(self, base_dir: Path, heading: str) -> str:
        return failures_table(self.frame, base_dir)

    def _plots(self, base_dir: Path, heading: str) -> str:
        if not self.plot_files:
            return "No plots: no ok record with latency or error values (or plots are disabled)."
        return "\n\n".join("!" + link(p.stem, p, base_dir) for p in self.plot_files)

    def _artifacts(self, base_dir: Path, heading: str) -> str:
        lines = []
        for row in self.rows:
            files = media_files(row)
            if files:
                label = (f"{text(get(row, 'job.model'))} {text(get(row, 'job.device'))} {text(get(row, 'job.dtype'))} "
                         f"{text(get(row, 'job.preset'))} {size_label(row)}")
                lines.append(f"- {label}: " + " ".join(link(name, path, base_dir) if path.exists()
                                                        else f"{name} (listed in the record, file not found)"
                                                        for name, path in files))
        return "\n".join(lines) if lines else "The records list no image, heatmap or video artifacts."

    def markdown(self, base_dir: Path) -> str:
        """The whole report.md text."""
        head = "# ascendbench report\n\n"
        if self.empty:
            return head + self.nothing() + "\n"
        intro = (f"{self.counts()}, gathered from {', '.join(self.sources)}. Every number below is read from a "
                 "record, and each row links to its record.json; \"missing\" means the record does not carry "
                 "the value.")
        titles = (("Seed layouts", "seed_layouts"), ("Accuracy", "accuracy"),
                  ("Local error per module (replay reference)", "replay"),
                  ("Output checks without a reference", "output_checks"),
                  ("Accuracy per resolution (Sulphur-2 seed layout)", "per_resolution"),
                  ("Performance", "performance"),
                  ("Latency per size and dtype (median, 95% CI)", "pivot"),
                  ("Where the time goes (profiler)", "profile"),
                  ("A/B variants", "variants"), ("Graph mode (compile cost)", "graph"),
                  ("Scaling over cards", "scaling"),
                  ("dtype recommendation", "recommendation"),
                  ("Cross-device comparison", "cross_device"), ("Hidden states per layer", "layers"),
                  ("Plots", "plots"), ("Images and heatmaps written by the jobs", "artifacts"),
                  ("Failed jobs", "failures"), ("Dry runs", "dry_runs"), ("Environment per machine", "environment"))
        chosen = self.settings.get("sections")
        if chosen:
            known = dict((name, title) for title, name in titles)
            titles = tuple((known.get(str(n), str(n)), str(n)) for n in chosen)
        body = "\n\n".join(f"## {title}\n\n{self.section(name, base_dir)}" for title, name in titles)
        return f"{head}{intro}\n\n{body}\n"


def media_files(row: dict[str, Any]) -> list[tuple[str, Path]]:
    """(name, absolute path) of the image/heatmap/video artifacts a record lists, relative to its job dir."""
    try:
        artifacts = json.loads(row.get("artifacts") or "{}")
    except (TypeError, json.JSONDecodeError):
        return []
    found = []
    for name, value in sorted(artifacts.items()):
        paths = value if isinstance(value, list) else [value]
        for i, rel in enumerate(p for p in paths if isinstance(p, str) and p.lower().endswith(_MEDIA)):
            path = inside(Path(row["job_dir"]), rel)
            if path is not None:  # an absolute, ../ or linked-out path is data pointing elsewhere: not listed
                found.append((name if len(paths) == 1 else f"{name}[{i}]", path))
    return found


def layer_detail_table(rows: Sequence[dict[str, Any]], base_dir: Path) -> str:
    """One table over the rows' hooked modules: job identity, module, worst value per check, failures."""
    checks = hidden_metrics(rows)
    headers = ["device", "dtype", "preset", "size", "steps"] + detail_headers(checks) + ["record"]
    body = [[text(get(r, "job.device")), text(get(r, "job.dtype")), text(get(r, "job.preset")), size_label(r),
             num(get(r, "job.steps"))] + detail_cells(agg, checks) + [record_link(r, base_dir)]
            for r in rows for agg in module_rows(r)]
    return table(headers, body)


def layers_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Every hidden-state entry of every row (layer#call/output), with the job's identity: layers.csv."""
    keys = ("record", "job.model", "job.device", "job.dtype", "job.preset", "job.batch_size", "job.height",
            "job.width", "job.num_frames", "job.steps")
    out = [{**{k: row.get(k) for k in keys}, **entry} for row in rows for entry in layer_rows(row)]
    return pd.DataFrame(out)


def _out_dir(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportError(f"--out {str(out_dir)!r} is a file, not a directory. Pass a directory for report.md, "
                          "records.csv and plots/ (it is created when missing), e.g. `--out reports`.")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create the report directory {str(out_dir)!r} ({type(exc).__name__}: "
                          f"{exc.strerror or exc}). Pass a writable directory with `--out DIR`.") from None
    return out_dir


def write_report(report: Report, out_dir: Path) -> dict[str, Path]:
    """Write report.md, report.html, records.csv, layers.csv (hidden states), records.parquet (pyarrow), plots/.

    Raises:
        ReportError: ``out_dir`` is a file or cannot be written.
    """
    out_dir = _out_dir(out_dir)
    try:
        return _write_all(report, out_dir)
    except OutputWriteError as exc:  # names the file, says full or read-only and what to do
        raise ReportError(f"{exc} Each report file is written whole or not at all: the previous one is kept."
                          ) from None
    except OSError as exc:
        raise ReportError(f"cannot write the report into {str(out_dir)!r} ({type(exc).__name__}: "
                          f"{exc.strerror or exc}, file {getattr(exc, 'filename', None)}). Free space or pass "
                          "another directory with `--out DIR`.") from None


def _write_all(report: Report, out_dir: Path) -> dict[str, Path]:
    written = {}
    report.make_plots(out_dir / "plots")
    written["markdown"] = out_dir / "report.md"
    markdown = report.markdown(out_dir)
    write_atomic(written["markdown"], markdown)
    written["html"] = out_dir / "report.html"
    page = html_document(markdown, out_dir, report.settings.html.embed_max_mb, report.settings.html.embed_total_mb,
                         roots=[Path(r["job_dir"]) for r in report.rows if r.get("job_dir")])
    write_atomic(written["html"], page)
    frame = report.frame[[c for c in report.frame.columns
                          if not c.startswith("metrics.layer/") and c != CONFIG_COLUMN]]
    written["csv"] = out_dir / "records.csv"
    write_atomic(written["csv"], frame.to_csv(index=False))
    layers = layers_frame(report.rows)
    if not layers.empty:
        written["layers_csv"] = out_dir / "layers.csv"
        write_atomic(written["layers_csv"], layers.to_csv(index=False))
    if importlib.util.find_spec("pyarrow") is not None:
        written["parquet"] = out_dir / "records.parquet"
        with atomic_path(written["parquet"]) as tmp:
            frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object}).to_parquet(tmp, index=False)
    return written
