"""`--help`, `--version` and `--cfg job` answer without importing torch, diffusers or the model code.

Each command runs in a fresh interpreter as the console script does; an ``atexit`` hook reports which of
the heavy packages ended up in ``sys.modules`` (Hydra exits through ``sys.exit``, so the hook is the only
reliable place to look).
"""

from __future__ import annotations

import json
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


def loaded_after(args: list[str], tmp_path) -> list[str]:
    """The heavy modules loaded by ``ascendbench <args>`` (which must exit 0)."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY, args=args)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED="))
    return json.loads(line.removeprefix("LOADED="))


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["--cfg", "job"]], ids=["help", "version", "cfg"])
def test_answers_without_the_heavy_imports(args, tmp_path):
    assert loaded_after(args, tmp_path) == []


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The check can fail: a run that imports torch is reported as such."""
    probe = PROBE.format(heavy=HEAVY, args=["--version"]).replace("main()\n", "import torch\nmain()\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "LOADED=[\"torch\"]" in done.stderr
