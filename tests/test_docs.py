"""Every command written in README.md and docs/*.md runs as written.

Each documented command is run in a form that needs no weights and no device: a job or sweep is
    composed
the way Hydra composes it (each value of each swept key, the sweep files' own parameters included)
and its cross-field rules are checked; a tool's options must be among its ``--help`` options; a make
target and its variables must exist in the Makefile. An unknown key, a missing option or a wrong
module name fails.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from ascendbench.config.rules import check_config

from helpers import compose_config, run_app
from helpers.docs import ROOT, DocCommand, collect

COMMANDS = collect()
MAKE_TOOLS = {"report": "ascendbench.report", "verify": "ascendbench.verify",
              "validate": "ascendbench.validate"}
SKIP_KEYS = ("-m", "--multirun")


def _id(command: DocCommand) -> str:
    return command.where


@lru_cache(maxsize=None)
def _help(module: str) -> str:
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True,
                          timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, f"python -m {module} --help failed: {done.stderr[-500:]}"
    return done.stdout


@lru_cache(maxsize=1)
def _makefile() -> tuple[set[str], str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-zA-Z][\w-]*):", text, flags=re.M)), text


def _sweep_values(overrides: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(the fixed overrides, swept key -> its values), the sweep files' params included."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    fixed, swept = [], {}
    for override, text in zip(parsed, overrides, strict=True):
        if override.is_sweep_override():
            swept[override.get_key_element()] = list(override.sweep_string_iterator())
        else:
            fixed.append(text)
    params = compose_config(fixed, return_hydra_config=True).hydra.sweeper.params or {}
    for key, value in params.items():
        swept.setdefault(key, _param_values(key, str(value)))
    return fixed, swept


def _param_values(key: str, value: str) -> list[str]:
    """The values of a sweeper parameter: ``a,b`` (basic sweeper), ``choice(a, b)`` or the ends of
    ``interval(1, 4)`` (Optuna, ``+search=``)."""
    override = OverridesParser.create().parse_overrides([f"{key}={value}"])[0]
    if not override.is_sweep_override():
        return [value]
    if override.is_interval_sweep():
        return [str(override.value().start), str(override.value().end)]
    return list(override.sweep_string_iterator())


def _jobs(overrides: list[str]) -> list[list[str]]:
    """Enough jobs that every value of every swept key composes once."""
    fixed, swept = _sweep_values(overrides)
    count = max((len(v) for v in swept.values()), default=1)
    return [fixed + [f"{key}={values[i % len(values)]}" for key, values in swept.items()]
            for i in range(count)]


def _check_job(words: list[str]) -> None:
    overrides = [w for w in words if w not in SKIP_KEYS]
    if "--cfg" in overrides:
        at = overrides.index("--cfg")
        overrides = overrides[:at] + overrides[at + 2:]
    for job in _jobs(overrides):
        check_config(compose_config(job, return_hydra_config=True))


def _check_tool(module: str, words: list[str]) -> None:
    assert importlib.util.find_spec(module) is not None, f"no module {module}"
    options = {w.strip("[]").split("=")[0] for w in words if w.strip("[]").startswith("-")}
    text = _help(module)
    missing = [o for o in options if o not in text]
    assert not missing, f"python -m {module} has no option {missing}"


def _check_make(words: list[str]) -> None:
    targets, text = _makefile()
    goals = [w for w in words if "=" not in w]
    for goal in goals or ["help"]:
        assert goal in targets, f"make has no target {goal!r} (targets: {sorted(targets)})"
    for word in (w for w in words if "=" in w):
        name, value = word.split("=", 1)
        assert f"$({name})" in text or f"{name} ?=" in text, (
            f"the Makefile reads no variable {name}")
        if name == "ARGS" and goals and goals[0] in MAKE_TOOLS:
            _check_tool(MAKE_TOOLS[goals[0]], value.split())


def test_the_collector_finds_the_documented_commands():
    programs = {c.program for c in COMMANDS}
    assert {"ascendbench", "python -m", "make"} <= programs and len(COMMANDS) > 60
    assert any("+sweep=flux2_accuracy" in c.text for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=_id)
def test_documented_command_runs_as_written(command, tmp_path):
    if command.program == "make":
        _check_make(command.words)
    elif command.program == "python -m":
        _check_tool(command.module, command.words)
    elif {"--help", "--version", "-sc"} & set(command.words):  # answered without composing a job
        assert run_app(command.words, cwd=tmp_path).returncode == 0
    else:
        _check_job(command.words)


def test_a_renamed_key_fails_the_documentation_check():
    """The gate can fail: a key that does not exist stops composition."""
    with pytest.raises(Exception, match="not in struct|Could not override|Key"):
        _check_job(["model=tiny_flux2_decoder", "metric.no_such_key=1.0"])


def test_the_readme_group_table_lists_every_shipped_option():
    """Each option of the config groups the README table covers is named in its row (the table
    once lacked `gemm` and the `graph` search that `--help` lists)."""
    root = Path(__file__).resolve().parents[1]
    rows: dict[str, str] = {}
    for line in (root / "README.md").read_text().splitlines():
        if line.startswith("| `"):  # the first table naming a group is the group table
            rows.setdefault(line.split("|")[1].strip(" `"), line)
    for group in ("model", "device", "dtype", "preset", "metric", "sweep", "search", "tracking",
                  "hydra/launcher"):
        options = sorted(p.stem for p in (root / "conf" / group).glob("*.yaml"))
        missing = [o for o in options if f"`{o}`" not in rows[group]]
        assert options and not missing, f"README table row {group!r} lacks {missing}"
