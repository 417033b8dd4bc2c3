"""Reports over records: every ``record.json`` gathered into pandas, then Markdown, HTML, CSV and
plots (``python -m ascendbench.report``; docs/reports.md)."""
