"""The reference child process cannot import torch_npu, and a second job reuses its cached
reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch
from hydra.utils import instantiate

from ascendbench.baseline.compute import run_reference
from ascendbench.baseline.service import ReferenceQuery, get_or_compute
from ascendbench.tasks.inputs import describe

from helpers import TINY_RUN, run_job

FAKE_TORCH_NPU = """
import os
open(os.environ["FAKE_TORCH_NPU_MARKER"], "w").write("imported")
npu = None
"""


def _plant_fake_torch_npu(tmp_path):
    site = tmp_path / "fake_site"
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu" / "__init__.py").write_text(FAKE_TORCH_NPU)
    return site, tmp_path / "torch_npu_was_imported"


def test_the_child_process_cannot_import_a_planted_torch_npu(compose_cfg, tmp_path, monkeypatch):
    site, marker = _plant_fake_torch_npu(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site), "FAKE_TORCH_NPU_MARKER": str(marker)}
    control = subprocess.run([sys.executable, "-c", "import torch_npu"], env=env,
                             capture_output=True, text=True)
    assert control.returncode == 0 and marker.exists(), "a plain process imports the planted one"
    marker.unlink()

    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("FAKE_TORCH_NPU_MARKER", str(marker))
    cfg = compose_cfg(["model=tiny_flux2_decoder", *TINY_RUN,
                       f"baseline.cache_dir={tmp_path / 'cache'}"])
    task = instantiate(cfg.model.task)
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    weights = {"kind": "random-init", "init_seed": 42}
    query = ReferenceQuery(cfg, task, inputs, torch.float64, weights, describe(inputs),
                           log_dir=tmp_path / "job")
    result = get_or_compute(query)

    assert not marker.exists(), "the reference process imported torch_npu"
    assert result.info["process"] == "child" and result.info["torch_npu_blocked"] is True
    child_log = (tmp_path / "job" / "baseline_child.log").read_text()
    assert result.info["cache_hit"] is False and "reference written" in child_log
    assert result.info["path"] == str(tmp_path / "cache" / result.info["cache_key"])
    meta = json.loads((tmp_path / "cache" / result.info["cache_key"] / "meta.json").read_text())
    assert meta["process"]["pid"] != os.getpid()
    # the child rebuilt the same model from the config: its outputs equal an in-process float64 run
    model = instantiate(cfg.model.loader).load(None, "random", 42).module
    expected = run_reference(model, task, inputs, torch.float64).outputs["image"]
    torch.testing.assert_close(result["image"], expected, rtol=1e-12, atol=1e-12)


def test_a_second_job_reuses_the_cached_baseline(compose_cfg, tmp_path):
    overrides = ["model=tiny_flux2_decoder", *TINY_RUN, f"baseline.cache_dir={tmp_path / 'cache'}",
                 "compare.layers=all", "bench.flops.enabled=false"]
    first = run_job(compose_cfg(overrides), tmp_path / "job1")
    second = run_job(compose_cfg([*overrides, "preset.iters=1"]), tmp_path / "job2")
    assert first["status"] == second["status"] == "ok", (first["error"], second["error"])
    assert first["baseline"]["cache_hit"] is False and second["baseline"]["cache_hit"] is True
    assert first["baseline"]["cache_key"] == second["baseline"]["cache_key"]
    assert (tmp_path / "job1" / "baseline_child.log").exists()
    assert not (tmp_path / "job2" / "baseline_child.log").exists(), "no child for a cache hit"
    assert second["metrics"]["mean_rel_err"]["value"] == first["metrics"]["mean_rel_err"]["value"]
    # compare.layers=all came from the cache too: float32 on CPU does not diverge from float64
    assert second["compare"]["mode"] == "all" and second["compare"]["modules"] > 10
    assert second["compare"]["first_divergent"] is None
    rows = (tmp_path / "job2" / "compare.csv").read_text().splitlines()
    assert rows[0].startswith("name,kind") and rows[0].endswith("result,message")
    assert any(",module," in row for row in rows)
    assert any(row.startswith("image,output") for row in rows)
    assert (tmp_path / "job2" / second["artifacts"]["image_compare_png"][0]).stat().st_size > 0
