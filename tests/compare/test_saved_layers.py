"""A saved run (``baseline.source``) keeps its layer captures: the per-layer table and the first
divergent module work against it, and a planted fault on the device is found there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ascendbench.baseline.source import SavedRun
from ascendbench.compare.hooks import saved_layers

from helpers.app import TINY_RUN, run_app
from helpers.planted import planted_fault

MODEL = ["model=tiny_flux2_decoder", "metric=regression", "compare.visual.enabled=false",
         "artifacts.media=false", "preset.iters=1", "preset.min_iters=1",
         "bench.flops.enabled=false", "fail_on=null"]
FAULTY = "decoder.up_blocks.1"
PATTERNS = "compare.layers=['decoder.up_blocks[:]']"


def _run(tmp_path: Path, name: str, args: list[str]) -> dict[str, Any]:
    cache = f"baseline.cache_dir={tmp_path / 'cache'}"
    result = run_app([*MODEL, *TINY_RUN, cache, *args], tmp_path, out_dir=tmp_path / name)
    record = json.loads((result.job_dir / "record.json").read_text())
    assert record["status"] == "ok", (result.output[-2000:], record.get("error"))
    return record


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A golden run without a reference (baseline.enabled=false), layers kept in both modes."""
    tmp_path = tmp_path_factory.mktemp("saved")
    _run(tmp_path, "all", ["baseline.enabled=false", "compare.layers=all"])
    _run(tmp_path, "patterns", ["baseline.enabled=false", PATTERNS])
    return tmp_path


def test_the_first_divergent_module_against_a_saved_run(golden: Path) -> None:
    record = _run(golden, "faulty_all", [f"baseline.source={golden / 'all'}", "compare.layers=all",
                                         planted_fault(FAULTY)])
    assert record["baseline"]["source"]["kind"] == "job"
    assert record["compare"]["first_divergent"]["module"] == f"{FAULTY}#0"
    clean = _run(golden, "clean_all", [f"baseline.source={golden / 'all'}", "compare.layers=all"])
    assert clean["compare"]["first_divergent"] is None and clean["compare"]["diverged"] == 0


def test_the_per_layer_table_against_a_saved_run(golden: Path) -> None:
    record = _run(golden, "faulty_patterns", [f"baseline.source={golden / 'patterns'}", PATTERNS,
                                              planted_fault(FAULTY)])
    results = record["compare"]["results"]
    assert results["decoder.up_blocks.0#0"]["result"] == "PASS"
    assert results[f"{FAULTY}#0"]["result"] == "FAIL"
    assert record["verdict"] == "FAIL"


def test_saved_captures_are_data(golden: Path, tmp_path: Path) -> None:
    record_path = golden / "all" / "record.json"
    record = json.loads(record_path.read_text())
    tensors = golden / "all" / "tensors" / "device.safetensors"
    run = SavedRun(str(golden / "all"), tensors, record_path, record)
    assert saved_layers(run, "all")[0]
    layers, why = saved_layers(run, ["decoder.up_blocks[:]"])
    assert layers is None and "mode all" in why
    outside = {**record["artifacts"], "layers_device_meta": "../patterns/record.json"}
    escaping = {**record, "artifacts": outside}
    layers, why = saved_layers(SavedRun(run.given, run.tensors, record_path, escaping), "all")
    # a path out of the saved directory is not followed
    assert layers is None and "kept no layer captures" in why
    damaged = tmp_path / "tensors" / "layers_device.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text(json.dumps({"mode": "all", "modules": [{"key": 1}]}))
    local = {"artifacts": {"layers_device_meta": "tensors/layers_device.json"}}
    layers, why = saved_layers(SavedRun("x", damaged, tmp_path / "record.json", local), "all")
    assert layers is None and "bad modules" in why
