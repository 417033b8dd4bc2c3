"""Hangs of a dry run at large sizes: planning estimates memory on the meta device and digests the
inputs, so it must neither compute every tile or attention chunk of a float64 reference (minutes
at 4096^2) nor copy the inputs several times over (4.9 GB at 11584^2)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from helpers import read_record
from helpers.app import BASE_ENV

# Digest and statistics of a 512 MiB float32 tensor in a fresh process; prints the resident growth
# in MiB.
GROWTH = """
import resource, torch
from ascendbench.tasks.inputs import describe, summarize
x = torch.randn(128 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
describe({"x": x}); summarize({"x": x})
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def test_the_dry_run_of_the_tiny_twin_at_4096_is_fast_and_small(tmp_path):
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ascendbench", "model=tiny_flux2_decoder",
                             "device=cpu",
                             "dry_run=true", "preset.height=4096", "preset.width=4096",
                             f"hydra.run.dir={tmp_path / 'job'}",
                             f"baseline.cache_dir={tmp_path / 'cache'}"],
                            cwd=tmp_path, env={**os.environ, **BASE_ENV}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()  # to the end: the process has exited (or closed its output)
    # this process's own peak, not that of every earlier child
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed, peak_gb = time.monotonic() - start, usage.ru_maxrss / 2**20
    assert proc.returncode == 0, output[-2000:]
    plan = read_record(tmp_path / "job")["plan"]
    # the float64 estimate is still made
    assert plan["memory"]["cpu_reference"]["activations_mb"] > 1000
    assert elapsed < 150, f"the dry run took {elapsed:.0f} s"
    assert peak_gb < 3, f"the dry run reached {peak_gb:.1f} GB resident"


def test_input_digest_and_statistics_make_no_full_size_copies():
    done = subprocess.run([sys.executable, "-c", GROWTH], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip()) < 256, f"{done.stdout.strip()} MiB more for a 512 MiB input"
