"""The import drawing has no arrow running back up (``python scripts/layers.py`` says the same)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "layers.py"
spec = importlib.util.spec_from_file_location("layers", SCRIPT)
layers = sys.modules["layers"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(layers)
FLOOR, Arrow, arrows, main, problems = (layers.FLOOR, layers.Arrow, layers.arrows, layers.main,
                                        layers.problems)


def test_no_import_runs_up_a_floor_or_both_ways():
    found = list(arrows())
    assert len(found) > 100, "the scanner finds the imports between packages"
    assert problems(found) == []


def test_every_package_has_a_floor():
    assert {a.source for a in arrows()} | {a.target for a in arrows()} <= set(FLOOR)


def test_a_planted_arrow_up_and_a_two_way_import_are_reported():
    planted = [Arrow("models", "job", "ascendbench/models/x.py:1"),
               Arrow("job", "models", "ascendbench/job/y.py:2"),
               Arrow("models", "nowhere", "ascendbench/models/z.py:3")]
    lines = problems(planted)
    up = "up: ascendbench/models/x.py:1: models (floor 2) imports job"
    assert any(line.startswith(up) for line in lines)
    assert "both ways: job and models import each other" in lines
    assert any(line.startswith("nowhere: on no floor") for line in lines)


def test_the_command_exits_0(capsys):
    assert main() == 0
    assert "0 problem(s)" in capsys.readouterr().out
