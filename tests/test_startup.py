"""`--help`, `--version` and `--cfg job` answer without importing torch, diffusers or the model
code.

The dry run does import the model's library: its memory plan runs the task on the ``meta`` device,
which needs the model's class (see :mod:`ascendbench.job.planning`); it still imports none of the
drawing and summary libraries a real job's artifacts need.

Each command runs in a fresh interpreter as the console script does; an ``atexit`` hook reports
which of the heavy packages ended up in ``sys.modules`` (Hydra exits through ``sys.exit``, so the
hook is the only reliable place to look).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("torch", "diffusers", "transformers", "scipy", "skimage", "lpips", "ascendbench.models",
         "ascendbench.tasks", "ascendbench.job.runner")
PROBE = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: sys.stderr.write('LOADED=' + json.dumps(sorted(m for m in {heavy!r} "
    "if m in sys.modules)) + '\\n'))\n"
    "sys.argv = ['ascendbench', *{args!r}]\n"
    "from ascendbench.__main__ import main\n"
    "main()\n"
)


def loaded_after(args: list[str], tmp_path, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of ``heavy`` loaded by ``ascendbench <args>`` (which must exit 0)."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=heavy, args=args)],
                          cwd=tmp_path,
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED="))
    return json.loads(line.removeprefix("LOADED="))


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["--cfg", "job"]],
                         ids=["help", "version", "cfg"])
def test_answers_without_the_heavy_imports(args, tmp_path):
    assert loaded_after(args, tmp_path) == []


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The check can fail: a run that imports torch is reported as such."""
    probe = PROBE.format(heavy=HEAVY, args=["--version"]).replace("main()\n",
                                                                  "import torch\nmain()\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert "LOADED=[\"torch\"]" in done.stderr


@pytest.mark.slow
def test_the_dry_run_imports_the_model_class_for_its_meta_run_and_no_drawing(tmp_path):
    flux2 = "diffusers.models.autoencoders.autoencoder_kl_flux2"  # the tiny twin's class
    loaded = loaded_after(["model=tiny_flux2_decoder", "device=cpu", "dry_run=true",
                           f"hydra.run.dir={tmp_path / 'j'}"],
                          tmp_path, heavy=(flux2, "matplotlib", "pandas"))
    assert loaded == [flux2]
    plan = json.loads((tmp_path / "j" / "record.json").read_text())["plan"]
    assert plan["memory"]["device_run"]["activations_mb"] > 0, "what the class is imported for"
