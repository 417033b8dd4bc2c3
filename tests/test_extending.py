"""docs/extending.md, followed literally: its files written as printed, its commands run as printed.

Every fenced block whose first line is ``# <path>`` is written to that path under a temporary
folder; every line of a ``bash`` block is run there (``python`` is this interpreter, a leading
``VAR=value`` is its environment). Then the records say what the guide promises: the new model, task
kind, metric and device ran, and the wrong metric function failed the dry run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
pytestmark = pytest.mark.slow


def guide_blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the guide, in order."""
    return BLOCK.findall(GUIDE.read_text())


def write_files(root: Path) -> dict[str, str]:
    """Write every block that names its path; path -> text."""
    files = {}
    for language, text in guide_blocks():
        first, _, _ = text.partition("\n")
        if language != "bash" and first.startswith("# my_ext/"):
            path = root / first[2:].strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            files[first[2:].strip()] = text
    return files


def run_line(line: str, root: Path) -> subprocess.CompletedProcess:
    """One command of the guide, run in ``root``."""
    words = shlex.split(line)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ASCENDBENCH_CACHE": str(root / "cache")}
    while "=" in words[0]:
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words[0] == "python", line
    return subprocess.run([sys.executable, *words[1:]], cwd=root, env=env, capture_output=True,
                          text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def followed(tmp_path_factory) -> tuple[Path, dict[str, str], list[tuple[str, Any]]]:
    root = tmp_path_factory.mktemp("guide")
    files = write_files(root)
    runs = [(line, run_line(line, root)) for language, text in guide_blocks() if language == "bash"
            for line in text.splitlines() if line.strip()]
    return root, files, runs


def record(root: Path, name: str) -> dict:
    return json.loads((root / "runs" / name / "record.json").read_text())


def test_every_command_of_the_guide_ends_as_the_guide_says(followed):
    _, _, runs = followed
    assert len(runs) == 6
    for line, done in runs:
        expected_failure = "no_such_loss" in line
        assert (done.returncode != 0) == expected_failure, (
            f"{line}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")


def test_the_yaml_only_model_ran_with_its_task_kind(followed):
    root, _, _ = followed
    rec = record(root, "sd_vae")
    assert rec["status"] == "ok" and rec["verdict"] == "PASS"
    assert rec["config"]["model"]["loader"]["class_path"] == "diffusers.AutoencoderKL"
    assert rec["config"]["model"]["task"]["latent_channels"] == 4


def test_the_new_task_kind_takes_three_files_and_under_80_lines(followed):
    root, files, _ = followed
    exercise = [path for path in files if "encode" in path]
    assert len(exercise) == 3
    assert sum(len(files[path].splitlines()) for path in exercise) <= 80
    rec = record(root, "encoder")
    assert rec["status"] == "ok" and rec["verdict"] == "PASS", rec.get("error")
    assert rec["config"]["model"]["task"]["_target_"] == "vae_encode_task.VaeEncodeTask"
    assert set(rec["outputs"]) == {"latent"}


def test_the_function_metric_is_judged_and_a_wrong_one_fails_the_dry_run(followed):
    root, _, runs = followed
    entry = record(root, "l1")["metrics"]["l1_loss"]
    assert entry["verdict"] == "PASS" and 0 <= entry["value"] <= 0.01
    bad = next(done for line, done in runs if "no_such_loss" in line)
    assert "no_such_loss" in bad.stdout + bad.stderr
    bad_record = record(root, "bad_metric")
    assert bad_record["status"] == "failed" and "no_such_loss" in bad_record["error"]["message"]


def test_the_device_option_applied_its_key(followed):
    root, _, _ = followed
    rec = record(root, "one_thread")
    assert rec["status"] == "ok" and rec["config"]["device"]["threads"] == 1


def test_the_folder_validates_with_its_new_model_and_task_kind(followed):
    _, _, runs = followed
    line, done = next((line, done) for line, done in runs if "ascendbench.validate" in line)
    assert done.returncode == 0, f"{line}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    assert "0 problem(s)" in done.stdout and "SKIP" not in done.stdout
    # defaults + 2 models, 1 task kind, 1 metric, 1 device
    assert "6 compositions" in done.stdout, done.stdout
