"""Layer comparison, compare.csv, side-by-side pictures and ``python -m ascendbench.compare``."""
