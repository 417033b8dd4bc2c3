"""``python -m ascendbench.report``: the report, README back-fill, ``--compare``, ``--mlflow``."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Sequence

from ascendbench.errors import ReportError
from ascendbench.report.backfill import SECTIONS, backfill_file
from ascendbench.report.compare import compare_frames
from ascendbench.report.document import Report, write_report
from ascendbench.report.gather import records_frame
from ascendbench.report.port import write_port
from ascendbench.report.select import parse_selection, select_frame
from ascendbench.report.settings import load_settings
from ascendbench.report.significance import LatencyRule

EXIT_REGRESSION, EXIT_USAGE = 1, 2


def parser() -> argparse.ArgumentParser:
    """The command-line options."""
    p = argparse.ArgumentParser(
        prog="python -m ascendbench.report",
        description="Gather record.json files into reports/report.md, report.html, records.csv and "
                    "PNG plots; optionally back-fill README markers, or compare two sets of "
                    "records (regression gate).")
    p.add_argument("paths", nargs="*", help="directories (searched recursively) or record files; "
                   "default: report.yaml `paths` (outputs/ and multirun/)")
    p.add_argument("--out", help="output directory (default: report.yaml `out_dir`, reports/)")
    p.add_argument("--readme", action="append", default=[], metavar="FILE",
                   help="Markdown file whose ascendbench markers are back-filled "
                        f"({', '.join(SECTIONS)}); repeatable")
    p.add_argument("--reference-device", help="device whose errors and latencies others are "
                   "compared with (default: report.yaml cross_device.reference_device)")
    p.add_argument("--select", action="append", default=[], metavar="KEY=VALUE[,VALUE]",
                   help="report only the records matching (repeatable, all must hold): "
                        "sweep=<dir name>, model=, preset=, dtype=, device=, or a records.csv "
                        "column")
    p.add_argument("--lang", choices=("en", "zh"),
                   help="words of the seed layouts (default: report.yaml `lang`)")
    p.add_argument("--port", action="store_true", help="also write the port report: "
                   "<out>/port/<model>.md and .html, one README-shaped document per model in the "
                   "seeds' structure")
    p.add_argument("--no-plots", action="store_true",
                   help="skip the PNG plots (report.html is still written)")
    p.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                   help="regression gate: exit 1 when NEW has worse verdicts or is "
                        "significantly slower than OLD, measured nothing, or misses an OLD "
                        "workload; exit 2 for a bad path or option")
    p.add_argument("--alpha", help="significance level of --compare's latency test, 0 < alpha < 1 "
                                   "(default 0.05)")
    p.add_argument("--min-effect", help="smallest median latency shift --compare counts as slower, "
                                        "a fraction >= 0 (default 0.03)")
    p.add_argument("--noise", help="deprecated alias of --min-effect")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any report.yaml option, e.g. --set cross_device.limits.rmse=1.5")
    p.add_argument("--mlflow", nargs="?", const="", metavar="URI",
                   help="log each record as an MLflow run instead of writing the report, once per "
                        "record (docs/tracking.md); URI default: $MLFLOW_TRACKING_URI, else "
                        "sqlite:///mlflow.db")
    p.add_argument("--mlflow-experiment", default="ascendbench", metavar="NAME",
                   help="MLflow experiment of --mlflow (default: ascendbench)")
    return p


def run_report(args: argparse.Namespace, settings) -> int:
    """Write the report (and back-fill READMEs); print where everything went."""
    sources = args.paths or list(settings.paths)
    frame = records_frame(sources, missing_ok=not args.paths)
    report = Report(select_frame(frame, parse_selection(args.select)), settings, sources)
    out = Path(args.out or settings.out_dir)
    written = write_report(report, out)
    counts = report.counts() if not report.empty else "no records"
    print(f"report: {written.pop('markdown')} ({counts})")
    print(f"html: {written.pop('html')} (one self-contained page: sortable tables, plots embedded)")
    print("tables: " + ", ".join(str(v) for v in written.values()))
    for plot in report.plot_files:
        print(f"plot: {plot}")
    for path in write_port(report, out) if args.port else []:
        print(f"port report: {path}")
    for readme in args.readme:
        kept = backfill_file(Path(readme), lambda base: partial(report.section, base_dir=base))
        print(f"back-filled: {readme}" + (f" (left untouched: {'; '.join(kept)})" if kept else ""))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; the exit status (0 ok, 1 the --compare gate failed, 2 bad input or option)."""
    args = parser().parse_args(argv)
    overrides = list(args.set)
    flags = ((args.reference_device, "cross_device.reference_device"), (args.lang, "lang"),
             ("false" if args.no_plots else None, "plots"), (args.alpha, "compare.alpha"),
             (args.min_effect, "compare.min_effect"), (args.noise, "compare.noise"))
    overrides += [f"{key}={value}" for value, key in flags if value is not None]
    try:
        settings = load_settings(overrides)
        if args.mlflow is not None:
            from ascendbench.tracking.mlflow_export import run_mlflow  # deferred: only --mlflow

            return run_mlflow(args, settings)
        if args.compare:
            old, new = args.compare
            options = settings.compare
            comparison = compare_frames(records_frame([old]), records_frame([new]),
                                        LatencyRule.from_options(options),
                                        allow_missing=bool(options.allow_missing))
            print(f"OLD: {old}\nNEW: {new}\n" + comparison.text())
            return EXIT_REGRESSION if comparison.failed else 0
        return run_report(args, settings)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
