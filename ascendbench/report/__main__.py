"""``python -m ascendbench.report``: the report, the README back-fill and the ``--compare`` gate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ascendbench.errors import ReportError
from ascendbench.report.backfill import SECTIONS, backfill_file
from ascendbench.report.compare import compare_frames
from ascendbench.report.document import Report, write_report
from ascendbench.report.gather import records_frame
from ascendbench.report.settings import load_settings

EXIT_REGRESSION = 1
EXIT_USAGE = 2


def parser() -> argparse.ArgumentParser:
    """The command-line options."""
    p = argparse.ArgumentParser(
        prog="python -m ascendbench.report",
        description="Gather record.json files into reports/report.md, records.csv and PNG plots; optionally "
                    "back-fill README markers, or compare two sets of records (regression gate).")
    p.add_argument("paths", nargs="*", help="directories (searched recursively) or record files; "
                   "default: report.yaml `paths` (outputs/ and multirun/)")
    p.add_argument("--out", help="output directory (default: report.yaml `out_dir`, reports/)")
    p.add_argument("--readme", action="append", default=[], metavar="FILE",
                   help=f"Markdown file whose ascendbench markers are back-filled ({', '.join(SECTIONS)}); repeatable")
    p.add_argument("--reference-device", help="device whose errors and latencies others are compared with "
                   "(default: report.yaml cross_device.reference_device)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                   help="regression gate: exit 1 when NEW has worse verdicts or slower medians than OLD, measured "
                        "nothing, or misses an OLD workload; exit 2 for a bad path or option")
    p.add_argument("--noise", help="latency noise fraction for --compare, finite and >= 0 (default 0.03)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any report.yaml option, e.g. --set cross_device.limits.rmse=1.5")
    return p


def run_compare(old: str, new: str, options) -> int:
    """Print the comparison; 1 when the gate fails (regression, nothing measured, OLD workload missing), else 0."""
    comparison = compare_frames(records_frame([old]), records_frame([new]), float(options.noise),
                                allow_missing=bool(options.allow_missing))
    print(f"OLD: {old}\nNEW: {new}\n" + comparison.text())
    return EXIT_REGRESSION if comparison.failed else 0


def run_report(args: argparse.Namespace, settings) -> int:
    """Write the report (and back-fill READMEs); print where everything went."""
    sources = args.paths or list(settings.paths)
    frame = records_frame(sources, missing_ok=not args.paths)
    report = Report(frame, settings, sources)
    written = write_report(report, Path(args.out or settings.out_dir))
    print(f"report: {written['markdown']} ({report.counts() if not report.empty else 'no records'})")
    print("tables: " + ", ".join(str(v) for k, v in written.items() if k != "markdown"))
    for plot in report.plot_files:
        print(f"plot: {plot}")
    for readme in args.readme:
        unknown = backfill_file(Path(readme), lambda base: lambda name: report.section(name, base))
        left = f" (unknown markers left untouched: {', '.join(unknown)})" if unknown else ""
        print(f"back-filled: {readme}{left}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 the --compare gate failed, 2 bad input or option)."""
    args = parser().parse_args(argv)
    overrides = list(args.set)
    if args.reference_device:
        overrides.append(f"cross_device.reference_device={args.reference_device}")
    if args.no_plots:
        overrides.append("plots=false")
    if args.noise is not None:
        overrides.append(f"compare.noise={args.noise}")
    try:
        settings = load_settings(overrides)
        if args.compare:
            return run_compare(*args.compare, settings.compare)
        return run_report(args, settings)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
