"""The seed reports (../shared/seeds/, beside the repository) read by the tests: their header rows
and first columns, and the Markdown tables of a report section, to hold the report's seed layouts
against them."""

from __future__ import annotations

from pathlib import Path

SEEDS = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"


def seed_text(prefix: str) -> str:
    """The text of seed report ``<prefix>_*.txt``."""
    return next(SEEDS.glob(f"{prefix}_*.txt")).read_text()


def seed_header(prefix: str, first: str) -> list[str]:
    """The seed's tab-separated header row whose first cell is ``first``."""
    rows = [line.split("\t") for line in seed_text(prefix).splitlines()
            if line.startswith(first + "\t")]
    assert rows, f"seed {prefix} has no table starting with {first!r}"
    return rows[0]


def seed_column(prefix: str, first: str) -> list[str]:
    """The first cells of the rows of the seed's table whose header starts with ``first``."""
    lines = seed_text(prefix).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first + "\t"))
    column = []
    for line in lines[start + 1:]:
        if "\t" not in line:
            break
        column.append(line.split("\t")[0])
    return column


def tables(text: str, title: str) -> list[list[list[str]]]:
    """The Markdown tables of the section ``### <model>: <title>``, as lists of cell rows (header
    first)."""
    section = text.split(f": {title}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    found, current = [], []
    for line in section.splitlines() + [""]:
        if line.startswith("|"):
            if not line.startswith("|---"):
                current.append([c.strip() for c in line.strip("|").split(" | ")])
        elif current:
            found.append(current)
            current = []
    return found


def names_verdict(cell: str, record: dict, most: int = 3) -> bool:
    """The verdict cell says the record's verdict and, for a FAIL, names the failing metrics (hidden
    states by their check, the first ``most`` and how many more) with their values (the verdict
    contract: ``FAIL (video/mean_rel_err 7.24% > 1%)``)."""
    failed = {f"hidden.{name.rsplit('/', 1)[-1]}" if name.startswith("layer/") else name
              for name, entry in record["metrics"].items()
              if isinstance(entry, dict) and entry.get("verdict") == "FAIL"}
    if record["verdict"] != "FAIL" or not failed:
        return cell == str(record["verdict"])
    named = [name for name in failed if f"{name} " in cell]
    more = len(failed) - most
    return cell.startswith("FAIL (") and (named == list(failed) or more > 0 and len(named) == most
                                          and cell.endswith(f", +{more} …)"))
