"""Reports over records: gather every ``record.json`` into pandas, write Markdown, HTML, CSV and plots.

    python -m ascendbench.report [PATH ...]            # outputs/ and multirun/ by default -> reports/
    python -m ascendbench.report --readme README.md    # also back-fill the README's markers
    python -m ascendbench.report --compare OLD NEW     # regression gate (exit 1 on regressions)
"""

from ascendbench.report.backfill import SECTIONS, backfill_file, fill
from ascendbench.report.compare import compare_frames
from ascendbench.report.document import Report, write_report
from ascendbench.report.gather import find_records, load_row, records_frame
from ascendbench.report.settings import load_settings

__all__ = ["SECTIONS", "Report", "backfill_file", "compare_frames", "fill", "find_records", "load_row",
           "load_settings", "records_frame", "write_report"]
