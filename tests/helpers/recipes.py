"""The seed recipes of the README run by the tests: the recipe's lines checked against the README, a
command turned into the tiny twin's arguments, run in this process, then the report as ``make
report`` runs it; and the readers of what came out (a section's linked records, a cell's digits
against a record's value)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from ascendbench.report.__main__ import main as report_main

from helpers.app import run_app
from helpers.seeds import tables

ROOT = Path(__file__).resolve().parents[2]


def readme_recipe(lines: list[str]) -> None:
    """Each line is in the README's recipe section as written (line continuations joined)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Reproducing the seed reports", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.replace("\\\n", " ").split())
    for command in (c.split("```")[0] for c in flat.split("python -m ascendbench")[1:]):
        assert "preset.warmup=" not in command or "bench.protocol=fixed" in command, \
            f"a seed's counted warm-ups and iterations need bench.protocol=fixed: {command}"
    for line in lines:
        assert " ".join(line.split()) in flat, \
            f"the README recipe changed: {line!r} is no longer in it"


def tiny(command: str, places: dict[str, str], overrides: list[str]) -> list[str]:
    """The README command's arguments after ``python -m ascendbench``, placeholders filled; each
    override replaces the argument of the same key, or is added (``?key=value``: added only where
    the key is absent)."""
    for placeholder, value in places.items():
        command = command.replace(placeholder, value)
    args = shlex.split(command.split("#", 1)[0])
    assert args[:3] == ["python", "-m", "ascendbench"], args
    args = args[3:]
    for override in overrides:
        only_if_absent, override = override.startswith("?"), override.lstrip("?")
        key = override.split("=", 1)[0]
        same = [i for i, a in enumerate(args) if a.split("=", 1)[0] == key]
        if same and not only_if_absent:
            args[same[0]] = override
        elif not same:
            args.append(override)
    return args


def run_recipe(tmp_path: Path, name: str, args: list[str], env: dict | None = None) -> None:
    """One README command as ``python -m ascendbench`` in this process (Hydra's own multirun for
    ``-m``), its jobs under multirun/<name> or outputs/<name>; exit 1 (a FAIL verdict of a
    random-init twin) is a result."""
    multirun = "-m" in args
    out = f"hydra.sweep.dir=multirun/{name}" if multirun else f"hydra.run.dir=outputs/{name}"
    result = run_app([*args, out, f"baseline.cache_dir={tmp_path / 'cache'}"], cwd=tmp_path,
                     env=env)
    assert result.returncode in (0, 1), result.output[-4000:]
    done = list((tmp_path / ("multirun" if multirun else "outputs") / name).glob("**/record.json"))
    assert done and all(json.loads(p.read_text())["status"] == "ok"
                        for p in done), (result.output[-4000:])


def make_report(tmp_path: Path, monkeypatch, readme: Path | None = None) -> dict[str, str]:
    """``make report [README=...]`` and ``make report REPORT_LANG=zh``: ``python -m
    ascendbench.report --port [--lang zh] [--readme ...]`` in the directory of the runs (records
    from outputs/ and multirun/, into reports/); report.md per language (the README is back-filled
    by each, Chinese last); the port report's Markdown and HTML as ``port_<lang>`` and
    ``port_html_<lang>``."""
    monkeypatch.chdir(tmp_path)
    texts = {}
    for lang, flags in (("en", []), ("zh", ["--lang", "zh"])):
        assert report_main(["--port", *flags, *(["--readme", str(readme)] if readme else [])]) == 0
        [port] = (tmp_path / "reports" / "port").glob("*.md")
        texts[lang] = (tmp_path / "reports" / "report.md").read_text()
        texts[f"port_{lang}"], texts[f"port_html_{lang}"] = (
            port.read_text(), port.with_suffix(".html").read_text())
    return texts


def section(text: str, title: str) -> str:
    """The text of the section ``### <model>: <title>`` (as ``tables`` finds it)."""
    assert f": {title}\n" in text, f"no section {title!r} in the report"
    return text.split(f": {title}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def linked(text: str, title: str, reports: Path) -> list[dict]:
    """The records the notes under the section's table link to (``records: [1](...), ...``), in
    order."""
    line = next(x for x in section(text, title).splitlines() if re.match(r"- (records|记录): ", x))
    return [json.loads((reports / t).resolve().read_text())
            for t in re.findall(r"\]\(<?([^)>]+)>?\)", line)]


def shows(cell: str, value: float, percent: bool = False) -> bool:
    """The cell's number is ``value`` (x100 for %) rounded to the significant digits the cell
    prints."""
    token = re.match(r"-?[0-9.]+(e[-+]?[0-9]+)?", cell)
    assert token, f"no number in cell {cell!r}"
    mantissa = token.group(0).split("e")[0].lstrip("-").replace(".", "").lstrip("0") or "0"
    value = value * 100 if percent else value
    return float(f"{value:.{len(mantissa)}g}") == pytest.approx(float(token.group(0)), rel=1e-9)


def ok_records(tmp_path: Path, under: str = "") -> list[dict]:
    """Every job record of the runs (not the report's own files), optionally only those under
    ``under``."""
    paths = [p for p in sorted(tmp_path.glob(f"{under or '*'}/**/record.json"))
             if "reports" not in p.parts]
    return [r for r in (json.loads(p.read_text()) for p in paths) if r["status"] == "ok"]


def bodies(text: str, title: str) -> list[list[str]]:
    """The value cells of the section's tables (label column dropped): equal in both languages."""
    return [[row[1:] for row in t[1:]] for t in tables(text, title)]
