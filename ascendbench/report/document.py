"""The report: named sections rendered from the records' DataFrame, written as files and plots."""

from __future__ import annotations

import importlib.util
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Callable

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import OutputWriteError, ReportError
from ascendbench.fileio import atomic_path, write_atomic
from ascendbench.report import hidden, tables
from ascendbench.report.crossdevice import crossdevice_section
from ascendbench.report.decoderswap import swap_section
from ascendbench.report.fmt import DRY_RUN, Row, Rows, cells, get, link, media_files
from ascendbench.report.gather import CONFIG_COLUMN
from ascendbench.report.html import html_document
from ascendbench.report.performance import performance_table, pivot_section
from ascendbench.report.plots import error_plot, latency_plot
from ascendbench.report.profile import profile_section
from ascendbench.report.recommend import recommendation_section
from ascendbench.report.scaling import graph_section, scaling_plots, scaling_section
from ascendbench.report.seedlayer import PROFILE_SECTIONS, layout, seed_layouts_section
from ascendbench.report.seedlayouts import resolution_table
from ascendbench.report.select import accuracy_rows, repeats_note, timing_rows
from ascendbench.report.significance import LatencyRule
from ascendbench.report.variants import variants_section

TITLES = (("Seed layouts", "seed_layouts"), ("Accuracy", "accuracy"),
          ("Local error per module (replay reference)", "replay"),
          ("Output checks without a reference", "output_checks"),
          ("Accuracy per resolution (Sulphur-2 seed layout)", "per_resolution"),
          ("Performance", "performance"), ("Latency per size and dtype (median, 95% CI)", "pivot"),
          ("Where the time goes (profiler)", "profile"), ("A/B variants", "variants"),
          ("FLUX.2 decoder swap (the seed's claims)", "decoder_swap"),
          ("Graph mode (compile cost)", "graph"), ("Scaling over cards", "scaling"),
          ("dtype recommendation", "recommendation"), ("Cross-device comparison", "cross_device"),
          ("Hidden states per layer", "layers"), ("Plots", "plots"),
          ("Images and heatmaps written by the jobs", "artifacts"), ("Failed jobs", "failures"),
          ("Dry runs", "dry_runs"), ("Environment per machine", "environment"))


class Report:
    """Everything the report says, from the records' rows, the report options and the paths read."""

    def __init__(self, frame: pd.DataFrame, settings: DictConfig, sources: list[str]) -> None:
        self.frame, self.settings = frame, settings
        self.sources = [str(s) for s in sources]
        self.rows = tables.ok_rows(frame)
        self.models = sorted({str(m) for r in self.rows if (m := get(r, "job.model")) is not None})
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
        """``N records: 3 ok, 1 failed, 1 dry-run`` (statuses as recorded; dry runs apart)."""
        runs = self.frame["run"] if "run" in self.frame.columns else [None] * len(self.frame)
        statuses = Counter(DRY_RUN if run == DRY_RUN and s == "ok" else str(s)
                           for s, run in zip(self.frame["status"], runs, strict=True))
        return f"{len(self.frame)} record(s): " + ", ".join(f"{n} {s}"
                                                          for s, n in sorted(statuses.items()))

    def of(self, model: str) -> list[Row]:
        """The ok rows of one model."""
        return [r for r in self.rows if get(r, "job.model") == model]

    def make_plots(self, out_dir: Path) -> list[Path]:
        """Write the PNG plots into ``out_dir`` (when enabled) and remember them."""
        if not self.settings.plots or not self.rows:
            return []
        out_dir.mkdir(parents=True, exist_ok=True)
        metric = self.settings.recommendation.error_metric
        for model in self.models:
            for path in (latency_plot(self.of(model), model, out_dir),
                         error_plot(self.of(model), model, metric, out_dir)):
                self.plot_files += [path] if path is not None else []
        self.plot_files.extend(scaling_plots(self.rows, out_dir))
        return self.plot_files

    def section(self, name: str, base_dir: Path) -> str:
        """One named section (the names README markers use), links relative to ``base_dir``."""
        if self.empty:
            return self.nothing()
        base_dir, s, rows = Path(base_dir), self.settings, self.rows
        if name in PROFILE_SECTIONS:
            return (layout(name, rows, str(s.lang), base_dir)
                    or f"No record of a task with the `{name}` layout.")
        rule = LatencyRule.from_options(s.compare)
        renderers: dict[str, Callable[[], str]] = {
            "seed_layouts": partial(seed_layouts_section, rows, self.models, str(s.lang), base_dir),
            "accuracy": partial(self._per_model, self._accuracy, base_dir, "accuracy"),
            "performance": partial(self._per_model, self._performance, base_dir, "performance"),
            "per_resolution": partial(self._per_resolution, base_dir),
            "layers": partial(self._layers, base_dir),
            "replay": partial(hidden.replay_section, rows, base_dir),
            "output_checks": partial(hidden.output_checks_section, rows, base_dir),
            "dry_runs": partial(tables.dry_runs_table, self.frame, base_dir),
            "pivot": partial(pivot_section, rows, self.models, base_dir),
            "profile": partial(profile_section, rows, base_dir),
            "variants": partial(variants_section, rows, list(s.variants.show), base_dir, rule),
            "decoder_swap": partial(swap_section, rows, base_dir, rule),
            "graph": partial(graph_section, rows, base_dir),
            "scaling": partial(scaling_section, rows, base_dir),
            "recommendation": partial(recommendation_section, rows, self.models,
                                      s.recommendation.error_metric, base_dir),
            "cross_device": partial(crossdevice_section, rows, s.cross_device.reference_device,
                                    OmegaConf.to_container(s.cross_device.limits, resolve=True),
                                    base_dir),
            "environment": partial(tables.environment_table, self.frame, base_dir),
            "failures": partial(tables.failures_table, self.frame, base_dir),
            "plots": partial(self._plots, base_dir),
            "artifacts": partial(self._artifacts, base_dir)}
        if name == "recommendation" and not rows:
            return "No job finished ok, so no dtype can be recommended."
        return renderers[name]()

    def _per_model(self, render: Callable[[Rows, Path], str], base_dir: Path, what: str) -> str:
        if not self.rows:
            return f"No job finished ok, so there is no {what} to show (see the failed jobs)."
        return "\n\n".join(f"### {m}\n\n{render(self.of(m), base_dir)}" for m in self.models)

    def _accuracy(self, rows: Rows, base_dir: Path) -> str:
        rows = accuracy_rows(rows)
        if not rows:
            return "Only performance runs (baseline.enabled=false): nothing judged."
        return (tables.accuracy_table(rows, list(self.settings.accuracy.show), base_dir)
                + repeats_note(rows))

    def _performance(self, rows: Rows, base_dir: Path) -> str:
        rows, options = timing_rows(rows), self.settings.performance
        cpu_rows = [r for r in self.rows if get(r, "job.device") == "cpu"]
        return (performance_table(rows, cpu_rows, options.cpu_dtype, base_dir, list(options.show))
                + repeats_note(rows))

    def _per_resolution(self, base_dir: Path) -> str:
        options = self.settings.per_resolution
        rows = [r for r in accuracy_rows(self.rows) if get(r, "job.steps") is not None]
        if not rows:
            return ("No judged run of a task with denoising steps (text-to-video, tokenizer), so "
                    "the Sulphur-2 seed's per-resolution table does not apply to these records.")
        if str(self.settings.lang) == "zh":  # the seed's own headers, as its README has them
            return (layout("sulphur2_accuracy", rows, "zh", base_dir)
                    or resolution_table(rows, [], [], base_dir))
        return resolution_table(rows, list(options.psnr), list(options.ssim), base_dir)

    def _layers(self, base_dir: Path) -> str:
        parts = [f"### {model}\n\n" + hidden.layer_detail_table(rows, base_dir)
                 for model in self.models
                 if (rows := [r for r in self.of(model) if hidden.layer_rows(r)])]
        if not parts:
            return ("No job compared hidden states (compare.layers), so there is no per-layer "
                    "detail.")
        return ("Per hooked module: the worst value of each check over its calls and outputs, how "
                "many entries failed and the first that did; every entry (layer#call/output) is a "
                "row of layers.csv.\n\n" + "\n\n".join(parts))

    def _plots(self, base_dir: Path) -> str:
        if not self.plot_files:
            return "No plots: no ok record with latency or error values (or plots are disabled)."
        return "\n\n".join("!" + link(p.stem, p, base_dir) for p in self.plot_files)

    def _artifacts(self, base_dir: Path) -> str:
        lines = []
        for row in self.rows:
            if files := media_files(row):
                label = " ".join(cells(row, ["job.model", "job.device", "job.dtype", "job.preset",
                                             "size"]))
                lines.append(f"- {label}: " + " ".join(
                    link(name, path, base_dir) if path.exists()
                    else f"{name} (listed in the record, file not found)" for name, path in files))
        return "\n".join(lines) or "The records list no image, heatmap or video artifacts."

    def markdown(self, base_dir: Path) -> str:
        """The whole report.md text."""
        head = "# ascendbench report\n\n"
        if self.empty:
            return head + self.nothing() + "\n"
        intro = (f"{self.counts()}, gathered from {', '.join(self.sources)}. Every number below is "
                 "read from a record, and each row links to its record.json; \"missing\" means the "
                 "record does not carry the value.")
        titles, chosen = TITLES, self.settings.get("sections")
        if chosen:
            known = {name: title for title, name in TITLES}
            titles = tuple((known.get(str(n), str(n)), str(n)) for n in chosen)
        body = "\n\n".join(f"## {title}\n\n{self.section(name, base_dir)}"
                           for title, name in titles)
        return f"{head}{intro}\n\n{body}\n"


def write_report(report: Report, out_dir: Path) -> dict[str, Path]:
    """Write report.md, report.html, records.csv, layers.csv, records.parquet, plots/."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportError(f"--out {str(out_dir)!r} is a file, not a directory. Pass a directory "
                          "for report.md, records.csv and plots/ (it is created when missing), "
                          "e.g. `--out reports`.")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create the report directory {str(out_dir)!r} "
                          f"({type(exc).__name__}: {exc.strerror or exc}). Pass a writable "
                          "directory with `--out DIR`.") from None
    try:
        return _write_all(report, out_dir)
    except OutputWriteError as exc:  # names the file, says full or read-only and what to do
        raise ReportError(f"{exc} Each report file is written whole or not at all: the previous "
                          "one is kept.") from None
    except OSError as exc:
        named = f", file {exc.filename}" if exc.filename else ""
        raise ReportError(f"cannot write the report into {str(out_dir)!r} ({type(exc).__name__}: "
                          f"{exc.strerror or exc}{named}). Free space or pass another directory "
                          "with `--out DIR`.") from None


def _write_all(report: Report, out_dir: Path) -> dict[str, Any]:
    report.make_plots(out_dir / "plots")
    written = {"markdown": out_dir / "report.md", "html": out_dir / "report.html",
               "csv": out_dir / "records.csv"}
    markdown = report.markdown(out_dir)
    write_atomic(written["markdown"], markdown)
    html = report.settings.html
    roots = [Path(r["job_dir"]) for r in report.rows if r.get("job_dir")]
    write_atomic(written["html"], html_document(markdown, out_dir, html.embed_max_mb,
                                                html.embed_total_mb, roots=roots))
    frame = report.frame[[c for c in report.frame.columns
                          if not c.startswith("metrics.layer/") and c != CONFIG_COLUMN]]
    write_atomic(written["csv"], frame.to_csv(index=False))
    layers = hidden.layers_frame(report.rows)
    if not layers.empty:
        written["layers_csv"] = write_atomic(out_dir / "layers.csv", layers.to_csv(index=False))
    if importlib.util.find_spec("pyarrow") is not None:
        written["parquet"] = out_dir / "records.parquet"
        text = {c: "string" for c in frame.columns if frame[c].dtype == object}
        with atomic_path(written["parquet"]) as tmp:
            frame.astype(text).to_parquet(tmp, index=False)
    return written
