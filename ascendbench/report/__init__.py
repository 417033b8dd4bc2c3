"""Reports over records: Markdown, HTML, CSV and plots (``python -m ascendbench.report``)."""
